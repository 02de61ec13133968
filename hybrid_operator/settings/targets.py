"""Finding what a watches.yaml entry runs: a role (by path, on a roles path, or a collection's) or a playbook.

Called by ``watches`` for each entry's and finalizer's ``role`` and ``playbook``. The lookup order is
operator-sdk's; what is found must also be what it claims to be, because Ansible itself is lenient: it
takes any existing path as a role (``role: /etc`` runs nothing, every time) and reports a file that is not
a playbook only when the first reconcile runs. Problems are raised as ValueError; ``watches`` names the
entry and field.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from hybrid_operator.errors import ConfigError
from hybrid_operator.settings.yamlfiles import playbook_problem, read_text

PLAYBOOK_MAX_BYTES = 4 << 20  # playbooks are a few KiB; this only keeps a wrong path from costing minutes
PATH_MAX = 4096

_FQCN_ROLE = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
_EXTENSIONS = ("", ".yml", ".yaml", ".json")  # the names Ansible tries for <dir>/main, in its order
# The files Ansible loads from a role by itself. A role has at least one of them; a directory with none
# is not a role. defaults/ and vars/ may hold a main/ directory of files instead.
_ROLE_FILES = tuple(f"{d}/main{ext}" for d in ("tasks", "handlers", "meta", "defaults", "vars") for ext in _EXTENSIONS)
_ROLE_DIRS = ("defaults/main", "vars/main")


def resolve_role(role: str, base_dirs: Sequence[Path], roles_paths: Sequence[Path]) -> str:
    """operator-sdk's lookup order: absolute path, ANSIBLE_ROLES_PATH, collection FQCN, ./roles/<name>.

    Returns the role's directory (or the FQCN, which Ansible resolves at run time).
    """
    _check_path_text(role)
    candidate = Path(role)
    if candidate.is_absolute():
        if not _is(candidate, stat.S_ISDIR):
            raise ValueError(f"role directory not found: {_shown(role)}")
        return _a_role(candidate)
    for directory in roles_paths:
        if _is(directory / role, stat.S_ISDIR):
            return _a_role((directory / role).resolve())
    if _FQCN_ROLE.match(role):
        return role  # resolved by Ansible through the collections path at run time
    for base in base_dirs:
        for option in (base / "roles" / role, base / role):
            if _is(option, stat.S_ISDIR):
                return _a_role(option.resolve())
    searched = [str(d) for d in roles_paths] + [str(b / "roles") for b in base_dirs]
    raise ValueError(f"role {_shown(role, quote=True)} not found (searched {', '.join(searched)})")


def resolve_playbook(playbook: str, base_dirs: Sequence[Path]) -> Path:
    """The playbook's path, once it is a file that reads as a playbook."""
    _check_path_text(playbook)
    found = _first_existing(Path(playbook), base_dirs)
    if found is None or not _is(found, stat.S_ISREG):
        raise ValueError(f"file not found: {_shown(playbook)}")
    try:
        text = read_text(found, limit=PLAYBOOK_MAX_BYTES, what="playbook")
    except ConfigError as exc:
        raise ValueError(str(exc)) from exc
    problem = playbook_problem(text)
    if problem:
        raise ValueError(f"{found} is not an Ansible playbook: {problem}")
    return found


def is_role(directory: Path) -> bool:
    """True when Ansible would load something from ``directory`` as a role."""
    return any(_is(directory / name, stat.S_ISREG) for name in _ROLE_FILES) or any(
        _is(directory / name, stat.S_ISDIR) for name in _ROLE_DIRS
    )


def _a_role(directory: Path) -> str:
    if not is_role(directory):
        raise ValueError(
            f"{directory} is not an Ansible role: it has none of tasks/main.yml, handlers/main.yml, "
            "meta/main.yml, defaults/main.yml or vars/main.yml"
        )
    return str(directory)


def _shown(text: str, quote: bool = False) -> str:
    """``text`` for a one-line error message: as written when it prints so, else escaped (a newline in a
    name must not start a new line in the log)."""
    if text.isprintable():
        return f"'{text}'" if quote else text
    return repr(text)


def _check_path_text(text: str) -> None:
    if "\x00" in text:
        raise ValueError("must not contain a NUL character")
    if len(text) > PATH_MAX:
        raise ValueError(f"longer than {PATH_MAX} characters")


def _is(path: Path, test: Callable[[int], bool]) -> bool:
    """``test`` on the file type of ``path``; False for any path the system refuses (too long, unencodable)."""
    try:
        return test(path.stat().st_mode)
    except (OSError, ValueError):
        return False


def _first_existing(candidate: Path, base_dirs: Sequence[Path]) -> Path | None:
    if candidate.is_absolute():
        return candidate if _is(candidate, _any_type) else None
    for base in base_dirs:
        if _is(base / candidate, _any_type):
            return (base / candidate).resolve()
    return None


def _any_type(_mode: int) -> bool:
    return True
