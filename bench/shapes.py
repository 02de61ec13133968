"""What operator roles are made of: modules, keywords, lookups, filters and tests, counted (issue #35, item 1).

    .venv/bin/python -m bench.shapes                                   # this repository's roles and fixtures
    .venv/bin/python -m bench.shapes --upstream "$(hack/upstream-testdata.sh | tail -n 1)" \\
        --upstream "$(hack/upstream-testdata.sh advanced /tmp/advanced | tail -n 1)" --kiali ~/src/kiali-operator
    .venv/bin/python -m bench.shapes --markdown                         # the table README Performance carries

A corpus is a directory; in it every YAML file under a ``tasks/`` or ``handlers/`` folder is a task list, and
every other YAML file whose top level is a list of plays (``hosts:``) is a playbook (Molecule's scenarios are
left out: they test an operator, they are not what it runs). Each task and block is counted once per keyword
it carries; a module is its action's fully qualified name (``ansible.legacy.``/short names as
``ansible.builtin.``); lookups are ``lookup()``/``query()``/``q()`` calls and ``with_<lookup>`` loops; filters
and tests are every name a template uses, found by parsing each template string, conditional and template
file (``templates/``) with Jinja2. Numbers only; nothing here runs a role.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, nodes
from jinja2.exceptions import TemplateSyntaxError

ROOT = Path(__file__).resolve().parent.parent
# This repository's own corpus: its roles and playbooks, the bench's roles, the test fixtures.
OWN = {
    "this repo: roles, playbooks": [ROOT / "roles", ROOT / "playbooks"],
    "bench: heavy": [ROOT / "bench" / "projects" / "heavy"],
    "tests/fixtures": [ROOT / "tests" / "fixtures"],
}
# Task keywords the issue asks about, in its order, then the others seen in operator roles.
KEYWORDS = (
    "when",
    "loop",
    "with_*",
    "loop_control",
    "register",
    "block",
    "rescue",
    "always",
    "failed_when",
    "changed_when",
    "until",
    "ignore_errors",
    "no_log",
    "vars",
    "check_mode",
    "notify",
    "delegate_to",
    "environment",
    "tags",
    "become",
    "run_once",
    "any_errors_fatal",
    "async",
    "module_defaults",
    "collections",
    "args",
    "diff",
)
CONDITIONALS = ("when", "failed_when", "changed_when", "until")
INCLUDES = {
    "include_tasks",
    "import_tasks",
    "include_role",
    "import_role",
    "include_vars",
    "include",
    "import_playbook",
    "set_fact",
}
SKIP_DIRS = {"molecule", ".git", "node_modules", "__pycache__", ".venv"}


class _Loader(yaml.SafeLoader):
    """YAML as Ansible reads it, without Ansible: its own tags (``!unsafe``, ``!vault``) read as plain values."""


def _any_tag(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_Loader.add_multi_constructor("!", _any_tag)


def _task_keywords() -> frozenset[str]:
    try:  # the real list, when Ansible is installed
        from ansible.playbook.block import Block
        from ansible.playbook.task import Task

        return frozenset(Task.fattributes) | frozenset(Block.fattributes) | {"local_action", "include", "args"}
    except ImportError:  # pragma: no cover - the bench runs in the project's venv
        return frozenset(KEYWORDS) | {"name", "action", "local_action"}


@dataclass
class Counts:
    """What one corpus is made of."""

    files: int = 0
    tasks: int = 0
    blocks: int = 0
    handlers: int = 0
    plays: int = 0
    templates: int = 0  # template files
    modules: collections.Counter[str] = field(default_factory=collections.Counter)
    keywords: collections.Counter[str] = field(default_factory=collections.Counter)
    lookups: collections.Counter[str] = field(default_factory=collections.Counter)
    filters: collections.Counter[str] = field(default_factory=collections.Counter)
    tests: collections.Counter[str] = field(default_factory=collections.Counter)
    errors: list[str] = field(default_factory=list)


_ENV = Environment()
_MARKS = ("{{", "{%", "{#")


def _jinja(counts: Counts, source: str, expression: bool) -> None:
    """Count the filters, tests and lookups of a template (or a bare conditional expression)."""
    text = "{{ " + source + " }}" if expression else source
    if not expression and not any(mark in source for mark in _MARKS):
        return
    try:
        tree = _ENV.parse(text)
    except TemplateSyntaxError:
        return  # Ansible-only syntax or a broken template: not this script's business
    for node in tree.find_all((nodes.Filter, nodes.Test, nodes.Call)):
        if isinstance(node, nodes.Filter):
            counts.filters[_short(node.name)] += 1
        elif isinstance(node, nodes.Test):
            counts.tests[_short(node.name)] += 1
        elif (
            isinstance(node, nodes.Call)
            and isinstance(node.node, nodes.Name)
            and node.node.name in ("lookup", "query", "q")
            and node.args
        ):
            first = node.args[0]
            name = first.value if isinstance(first, nodes.Const) and isinstance(first.value, str) else "(a variable)"
            counts.lookups[_short(name)] += 1


def _short(name: str) -> str:
    for prefix in ("ansible.builtin.", "ansible.legacy."):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _strings(data: Any, key: object = None) -> Iterator[tuple[object, str]]:
    if isinstance(data, str):
        yield key, data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from _strings(v, k)
    elif isinstance(data, list):
        for item in data:
            yield from _strings(item, key)


def _module_of(task: dict[str, Any], keywords: frozenset[str]) -> str | None:
    if "action" in task or "local_action" in task:
        action = task.get("action") or task.get("local_action")
        if isinstance(action, dict):
            action = action.get("module")
        return str(action).split()[0] if action else None
    for key in task:
        if key not in keywords and not str(key).startswith("with_"):
            return str(key)
    return None


def _fqcn(module: str, collections: tuple[str, ...] = ()) -> str:
    """The module's fully qualified name as Ansible resolves it (routing included: ``k8s`` is
    ``kubernetes.core.k8s``), searching the ``collections:`` keyword's list first; the name as written when
    Ansible cannot resolve it here."""
    if module.startswith("ansible.legacy."):
        module = module[len("ansible.legacy.") :]
    try:
        from ansible.plugins.loader import module_loader
    except ImportError:  # pragma: no cover
        return module
    for loader_collections in ([*collections, "ansible.builtin"], None):
        with contextlib.suppress(Exception):
            found = module_loader.find_plugin_with_context(
                module, collection_list=loader_collections, ignore_deprecated=True
            )
            if found.resolved and found.resolved_fqcn:
                return _short_builtin(str(found.resolved_fqcn))
    return module


def _short_builtin(fqcn: str) -> str:
    return fqcn.replace("ansible.legacy.", "ansible.builtin.")


def _tasks(
    counts: Counts,
    entries: Any,
    keywords: frozenset[str],
    handler: bool = False,
    collections: tuple[str, ...] = (),
) -> None:
    if not isinstance(entries, list):
        return
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if "block" in entry:
            _block(counts, entry, keywords, handler, collections)
        else:
            _task(counts, entry, keywords, handler, collections)


def _block(
    counts: Counts, entry: dict[str, Any], keywords: frozenset[str], handler: bool, collections: tuple[str, ...]
) -> None:
    counts.blocks += 1
    for key in entry:
        if key in ("block", "rescue", "always") or key in KEYWORDS:
            counts.keywords[key] += 1
    for part in ("block", "rescue", "always"):
        _tasks(counts, entry.get(part), keywords, handler, collections)
    _templated(counts, entry, skip=("block", "rescue", "always"))


def _task(
    counts: Counts, entry: dict[str, Any], keywords: frozenset[str], handler: bool, collections: tuple[str, ...]
) -> None:
    counts.tasks += 1
    counts.handlers += handler
    module = _module_of(entry, keywords)
    if module is not None:
        counts.modules[_fqcn(module, collections)] += 1
    for key in map(str, entry):
        if key.startswith("with_"):
            counts.keywords["with_*"] += 1
            counts.lookups[key[len("with_") :]] += 1
        elif key in KEYWORDS:
            counts.keywords[key] += 1
    _templated(counts, entry)


def _templated(counts: Counts, entry: dict[str, Any], skip: tuple[str, ...] = ()) -> None:
    for key, value in entry.items():
        if key in skip:
            continue
        for under, text in _strings(value, key):
            _jinja(counts, text, expression=under in CONDITIONALS or (under == "that" and key != "args"))


def _plays(counts: Counts, plays: list[Any], keywords: frozenset[str]) -> None:
    for play in plays:
        if not isinstance(play, dict):
            continue
        if "import_playbook" in play:
            counts.keywords["import_playbook"] += 1
            continue
        counts.plays += 1
        listed = tuple(str(c) for c in play.get("collections") or [])
        for part in ("pre_tasks", "tasks", "post_tasks"):
            _tasks(counts, play.get(part), keywords, collections=listed)
        _tasks(counts, play.get("handlers"), keywords, handler=True, collections=listed)
        for role in play.get("roles") or []:
            counts.keywords["roles:"] += 1
            if isinstance(role, dict):
                _templated(counts, role)
        if play.get("gather_facts", True) not in (False, "false", "no", "False"):
            counts.keywords["gather_facts"] += 1
        _templated(counts, {k: v for k, v in play.items() if k in ("vars",)})


def _yaml_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if SKIP_DIRS.intersection(path.relative_to(root).parts) or not path.is_file():
            continue
        if path.suffix in (".yml", ".yaml"):
            yield path


@functools.cache
def _init_ansible() -> None:
    """Ansible's plugin loader, with our ``operator_sdk.util`` and ``hybrid_operator.util`` on its collections
    path, so that short module names resolve as in a run (once per process)."""
    ours = ROOT / "hybrid_operator" / "collections"
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
        filter(None, [str(ours), os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")])
    )
    with contextlib.suppress(ImportError):
        from ansible.plugins.loader import init_plugin_loader

        init_plugin_loader()


def count(roots: list[Path]) -> Counts:
    """Count every task file, playbook, variable file and template under ``roots``."""
    _init_ansible()
    counts = Counts()
    keywords = _task_keywords()
    for root in roots:
        for path in _yaml_files(root):
            _yaml_file(counts, path, path.relative_to(root).parts[:-1], keywords)
        for path in sorted(root.rglob("templates/*")):
            if path.is_file() and not SKIP_DIRS.intersection(path.relative_to(root).parts):
                counts.templates += 1
                with contextlib.suppress(UnicodeDecodeError):
                    _jinja(counts, path.read_text(encoding="utf-8"), expression=False)
    return counts


def _yaml_file(counts: Counts, path: Path, folders: tuple[str, ...], keywords: frozenset[str]) -> None:
    if "templates" in folders:
        return  # a template (counted by ``count``), whatever its name ends with
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:  # a file of Jinja a task renders (Kiali keeps some under tasks/)
        counts.templates += 1
        _jinja(counts, text, expression=False)
        return
    if "tasks" in folders or "handlers" in folders:
        counts.files += 1
        _tasks(counts, data, keywords, handler="handlers" in folders)
    elif _is_playbook(data):
        counts.files += 1
        _plays(counts, data, keywords)
    elif "defaults" in folders or "vars" in folders:
        for _key, text in _strings(data):
            _jinja(counts, text, expression=False)


def _is_playbook(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(p, dict) for p in data)
        and any("hosts" in p or "import_playbook" in p for p in data)
    )


def corpora(args: argparse.Namespace) -> dict[str, list[Path]]:
    found = dict(OWN)
    for path in args.upstream or []:
        found[f"operator-sdk: {path.name}"] = [path]
    if args.kiali:
        # Its roles/ holds one copy per Kiali version it can still install; a Kiali CR without spec.version
        # gets roles/default, the one its reconciles run (and the bench's).
        found["Kiali's operator"] = [args.kiali / "roles" / "default", args.kiali / "playbooks"]
    return found


def table(results: dict[str, Counts], top: int, markdown: bool) -> str:
    names = list(results)
    total = Counts()
    for c in results.values():
        for attr in ("files", "tasks", "blocks", "handlers", "plays", "templates"):
            setattr(total, attr, getattr(total, attr) + getattr(c, attr))
        for attr in ("modules", "keywords", "lookups", "filters", "tests"):
            getattr(total, attr).update(getattr(c, attr))
    columns = [*names, "all"]
    every = {**results, "all": total}
    rows: list[list[str]] = []
    rows.append(["**size**", *[""] * len(columns)])
    for attr in ("files", "plays", "tasks", "blocks", "handlers", "templates"):
        rows.append([attr, *[str(getattr(every[c], attr)) for c in columns]])
    for attr, title in (
        ("modules", "modules (tasks)"),
        ("keywords", "keywords (tasks and blocks)"),
        ("lookups", "lookups (uses)"),
        ("filters", "filters (uses)"),
        ("tests", "tests (uses)"),
    ):
        counter: collections.Counter[str] = getattr(total, attr)
        shown = counter.most_common(top if attr != "keywords" else None)
        rows.append([f"**{title}**", *[""] * len(columns)])
        for name, _n in shown:
            rows.append([f"`{name}`", *[str(getattr(every[c], attr)[name] or "") for c in columns]])
        rest = len(counter) - len(shown)
        if rest > 0:
            others = {n for n, _ in counter.most_common()[len(shown) :]}
            rows.append(
                [
                    f"{rest} others",
                    *[str(sum(v for k, v in getattr(every[c], attr).items() if k in others) or "") for c in columns],
                ]
            )
    if markdown:
        lines = ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [["", *columns], *rows]) for i in range(len(columns) + 1)]
    out = ["  ".join(c.ljust(w) for c, w in zip(["", *columns], widths, strict=True))]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.shapes", description=__doc__.split("\n\n")[0])
    p.add_argument("--upstream", type=Path, action="append", help="an operator-sdk test project (repeatable)")
    p.add_argument("--kiali", type=Path, help="a checkout of kiali/kiali-operator")
    p.add_argument("--top", type=int, default=15, help="rows per list (modules, lookups, filters, tests)")
    p.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = p.parse_args(argv)
    results = {name: count(roots) for name, roots in corpora(args).items()}
    print(table(results, args.top, args.markdown))
    for name, c in results.items():
        for error in c.errors:
            print(f"{name}: not parsed: {error}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
