"""The files of the roles every run may use, found once by the zygote so it can prepare them for its forks.

Where it sits: the zygote (``zygote.ZygoteServer.start``) calls ``prepare_roles`` after its warm-up, which
finds the files (``role_files``) of the roles on the roles path of its environment (``ANSIBLE_ROLES_PATH``:
the operator's ``--roles-path`` entries and the ``roles/`` beside watches.yaml) and in the directories its
warm-up request names (``protocol.WarmUp.prepare``: the roles watches.yaml names by their path and the
``roles/`` beside its playbooks, from ``executors.prepared_dirs``), and hands the YAML files to ``parsed``
(parsed once for every run) and the templates to ``templates`` (compiled once for every run). Bounded: a
roles path holding a whole file system costs the zygote at most ``MAX_FILES`` files of at most
``MAX_FILE_BYTES`` each, ``MAX_BYTES`` in all;
anything past that is simply not prepared (runs read it themselves, as before).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hybrid_operator.ansible.warm import actions, inworker, parsed, templates

MAX_FILES = 2000
MAX_FILE_BYTES = 1 << 20
MAX_BYTES = 32 << 20
# A role's directories that hold YAML Ansible loads (tasks, handlers, variables, its argument specs).
YAML_DIRS = ("tasks", "handlers", "defaults", "vars", "meta")
TEMPLATE_DIR = "templates"
ROLE_DEPTH = 3  # directories below a roles path entry a role may sit at (its name then holds slashes)
YAML_SUFFIXES = (".yml", ".yaml", ".json")


@dataclass
class RoleFiles:
    """What ``role_files`` found: YAML files, template files, and whether a bound stopped the search."""

    yaml: list[Path] = field(default_factory=list)
    templates: list[Path] = field(default_factory=list)
    truncated: bool = False


def roles_path_entries(value: str | None) -> list[Path]:
    """The directories of a ``ANSIBLE_ROLES_PATH`` value, in order, without repeats."""
    seen: list[Path] = []
    for entry in (value or "").split(os.pathsep):
        path = Path(entry).expanduser().absolute()
        if entry and path.is_dir() and path not in seen:
            seen.append(path)
    return seen


def role_files(roots: list[Path]) -> RoleFiles:
    """The YAML and template files of every role under ``roots`` (a role: a directory with a ``tasks/`` or
    ``meta/`` directory; see ``_roles``), or of the root itself when it is a role (a role watches.yaml names by
    its path), within the bounds of the module docstring. A role is read once, however often it is found."""
    found = RoleFiles()
    total = 0
    for role in _roles(roots):
        for sub, suffixes, into in [(d, YAML_SUFFIXES, found.yaml) for d in YAML_DIRS] + [
            (TEMPLATE_DIR, None, found.templates)
        ]:
            for path in _files(role / sub):
                if suffixes is not None and path.suffix not in suffixes:
                    continue
                size = path.stat().st_size
                if size > MAX_FILE_BYTES:
                    continue
                if len(found.yaml) + len(found.templates) >= MAX_FILES or total + size > MAX_BYTES:
                    found.truncated = True
                    return found
                total += size
                into.append(path)
    return found


def _roles(roots: list[Path]) -> list[Path]:
    """The roles at or under ``roots`` (down to ``ROLE_DEPTH`` directories: a role's name may hold slashes, as
    Kiali's ``roles/<version>/kiali-deploy``), in order, each once (by where it really is), named as found. A
    role's own directories are never searched for roles, nor hidden ones; a symbolic link below a root counts
    if it is a role, and is not followed otherwise. At most ``MAX_FILES`` directories are looked into."""
    seen: dict[Path, Path] = {}
    looked_into = 0
    stack = [(root, 0) for root in reversed(roots) if root.is_dir()]
    while stack:
        path, depth = stack.pop()
        if is_role(path):
            seen.setdefault(path.resolve(), path)
        elif depth < ROLE_DEPTH and looked_into < MAX_FILES and not (depth and path.is_symlink()):
            looked_into += 1
            children = [c for c in sorted(path.iterdir()) if c.is_dir() and not c.name.startswith(".")]
            stack += [(child, depth + 1) for child in reversed(children)]
    return list(seen.values())


def is_role(path: Path) -> bool:
    """A role: a directory, not hidden, with a ``tasks/`` or ``meta/`` directory."""
    return path.is_dir() and not path.name.startswith(".") and ((path / "tasks").is_dir() or (path / "meta").is_dir())


def _files(directory: Path) -> list[Path]:
    """Regular files under ``directory`` (recursively, not through symbolic links to directories), sorted."""
    if not directory.is_dir():
        return []
    out = []
    for base, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [Path(base, n) for n in sorted(names) if not n.startswith(".") and os.path.isfile(os.path.join(base, n))]
    return out


def prepare_roles(extra_dirs: list[Path]) -> list[str]:
    """What every run would otherwise do for the roles on the roles path and in ``extra_dirs`` (the directories
    the warm-up request named): parse their YAML, compile their templates, load their action plugins
    (``parsed``, ``templates``, ``actions``); the task names whose modules' payloads the builder prepares (none
    when runs keep them each in a cache of their own)."""
    started = time.monotonic()
    roots = roles_path_entries(os.environ.get("ANSIBLE_ROLES_PATH"))
    files = role_files([*roots, *extra_dirs])
    for name, problems in (("parsed files", parsed.install()), ("template", templates.install())):
        if problems:
            print(f"zygote: no {name} cache: {'; '.join(problems)}", file=sys.stderr)
    role_data = parsed.parse(files.yaml)
    compiled = templates.warm(role_data, files.templates)
    tried, loaded = actions.preload_role_actions(role_data)
    seconds = time.monotonic() - started
    print(
        f"zygote: {len(role_data)} role files parsed, {compiled} templates compiled, {loaded} action plugins "
        f"of {tried} task names loaded in {seconds:.2f}s",
        file=sys.stderr,
    )
    if files.truncated:
        count = len(files.yaml) + len(files.templates)
        print(f"zygote: only the first {count} role files prepared", file=sys.stderr)
    return actions.action_names(role_data) if inworker.installed() else []
