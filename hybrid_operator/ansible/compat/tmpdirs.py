"""A task's remote temp dir on the local connection made and removed in the run's process (``warm.tmpdirs``):
``ActionBase._make_tmp_path`` and ``_remove_tmp_path`` mirrored in Python instead of three ``/bin/sh`` commands
(``echo ~``, ``mkdir -p ... && mkdir ...``, ``rm -f -r ...``) per task of an action that ``TRANSFERS_FILES``
(``kubernetes.core.k8s`` and ``k8s_info``, ``template``, ``copy``...).

The mirror does what those shell commands do: the remote temp dir (``remote_tmp``, ``~`` expanded as the
shell's ``echo ~`` / ``echo ~user`` does), parents made as ``mkdir -p`` makes them under the ``umask 77`` the
command sets, a new ``ansible-tmp-<time>-<pid>-<random>`` dir of mode 0700, its path with a trailing slash as
``tmpdir``; removal as ``rm -f -r``. It is used only where it is exactly that: the ``local`` connection, no
``become``, Ansible's own POSIX shell functions, a path of plain characters (what ``echo`` would print as it
is), verbosity below 3 (where Ansible would print each command); and only while the functions it mirrors are
the very source written down here per minor (``_SOURCES``). Anything else, and any error, takes Ansible's path,
which then runs the commands and reports what goes wrong as it always did.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import re
import shutil
import stat
import textwrap
from typing import Any

from hybrid_operator.ansible.compat.versions import ansible_version

# sha256 (16 hex digits) of the dedented source of each function the mirror stands in for, per minor.
_ACTION_2_19 = {"_make_tmp_path": "894f71a8570b2a40", "_remote_expand_user": "456f76397f0a1848"}
_ACTION_2_20 = {"_make_tmp_path": "14aa4b87775d6154", "_remote_expand_user": "50496d499e6256b8"}
_COMMON = {
    "ActionBase._remove_tmp_path": "108114ae67d7aca8",
    "ShellBase.mkdtemp": "c8119e1af709a74e",
    "ShellBase.remove": "166bae2ff711f94a",
    "ShellBase.expand_user": "8862a776c44fc1d1",
    "ShellBase._generate_temp_dir_name": "8722967494d4d8a9",
    "ShellBase.join_path": "00ddb8485caa38dc",
}
_SOURCES = {
    (2, 19): {**_COMMON, **{f"ActionBase.{k}": v for k, v in _ACTION_2_19.items()}},
    (2, 20): {**_COMMON, **{f"ActionBase.{k}": v for k, v in _ACTION_2_20.items()}},
}
_PLAIN_PATH = re.compile(r"^/[A-Za-z0-9_./@%+=:,-]*$")  # echo prints it as it is: no quote, space, glob or $
_USER_HOME = re.compile(r"^~([_.A-Za-z0-9][-_.A-Za-z0-9]*)?$")  # the shell plugin's own rule, or bare ~


def _digest(function: Any) -> str:
    return hashlib.sha256(textwrap.dedent(inspect.getsource(function)).encode()).hexdigest()[:16]


def tmpdir_hook_problems() -> list[str]:
    """Why ``hook_tmpdirs`` cannot be installed on this ansible-core (empty: it can)."""
    major, minor, full = ansible_version()
    known = [v for v in _SOURCES if v <= (major, minor)]
    if not known:
        return [f"ansible-core {full}: no mirrored source for this minor"]
    try:
        from ansible.plugins.action import ActionBase
        from ansible.plugins.shell import ShellBase

        owners = {"ActionBase": ActionBase, "ShellBase": ShellBase}
        problems = []
        for name, digest in _SOURCES[max(known)].items():
            owner, attribute = name.split(".")
            if _digest(getattr(owners[owner], attribute)) != digest:
                problems.append(f"{name}: not the source this mirrors")
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def _mirrored(action: Any) -> bool:
    """Whether this action's temp dir commands are exactly what the mirror does."""
    from ansible.plugins.shell import ShellBase
    from ansible.utils.display import Display

    connection = action._connection
    shell = connection._shell
    return (
        getattr(connection, "transport", None) == "local"
        and not getattr(connection, "become", None)
        and not getattr(connection, "_remote_is_local", False)
        and getattr(shell, "SHELL_FAMILY", None) == "sh"
        and all(
            getattr(type(shell), name) is getattr(ShellBase, name)
            for name in ("mkdtemp", "_mkdtemp2", "remove", "expand_user", "_expand_user2", "join_path")
        )
        and Display().verbosity < 3
    )


def _expanded_remote_tmp(action: Any) -> str | None:
    """``remote_tmp`` as ``_remote_expand_user`` gives it on the local connection; None where it is not plain."""
    path = action.get_shell_option("remote_tmp", default="~/.ansible/tmp")
    if not isinstance(path, str):
        return None
    if path.startswith("~"):
        head, _sep, rest = path.partition(os.path.sep)
        user = (action._get_remote_user() or "") if head == "~" else head[1:]
        home = f"~{user}"
        if not _USER_HOME.match(home):
            return None
        expanded = os.path.expanduser(home)
        if expanded == home:  # unknown user: the shell would echo it back, and Ansible fall back to pwd
            return None
        path = os.path.join(expanded, rest) if rest else expanded
    return path if _PLAIN_PATH.match(path) and ".." not in path.split("/") else None


def _mkdir_700(path: str) -> None:
    os.mkdir(path, 0o700)
    os.chmod(path, 0o700)  # as under the command's umask 77, whatever this process's umask


def _make_dirs(base: str, basefile: str) -> str:
    """``mkdir -p BASE && mkdir BASE/BASEFILE`` under umask 77; the new dir."""
    parts = base.strip("/").split("/")
    for depth in range(1, len(parts) + 1):
        path = "/" + "/".join(parts[:depth])
        if not os.path.isdir(path):
            _mkdir_700(path)
    target = os.path.join(base, basefile)
    _mkdir_700(target)
    return target


def _remove(path: str) -> None:
    """``rm -f -r PATH`` for the dir ``_make_dirs`` made; raises where rm could do otherwise."""
    plain = path.rstrip("/")
    if os.path.islink(plain):
        raise OSError("a symbolic link: left to rm")
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISDIR(os.lstat(plain).st_mode):
            shutil.rmtree(plain)
        else:
            os.unlink(plain)


def hook_tmpdirs() -> None:
    """Mirror ``_make_tmp_path`` and ``_remove_tmp_path`` in Python where ``_mirrored`` (see the module
    docstring). Check ``tmpdir_hook_problems`` first."""
    from ansible.plugins.action import ActionBase

    make_original = ActionBase._make_tmp_path
    remove_original = ActionBase._remove_tmp_path

    def _make_tmp_path(self: Any, remote_user: str | None = None) -> Any:
        base = _expanded_remote_tmp(self) if _mirrored(self) and not self._is_become_unprivileged() else None
        if base is not None:
            shell = self._connection._shell
            try:
                made = _make_dirs(base, shell._generate_temp_dir_name())
            except OSError:
                return make_original(self, remote_user)  # the shell's try says what is wrong, as always
            self._cleanup_remote_tmp = True
            shell.tmpdir = shell.join_path(made, "")
            return shell.tmpdir
        return make_original(self, remote_user)

    def _remove_tmp_path(self: Any, tmp_path: Any, force: bool = False) -> Any:
        shell = self._connection._shell
        if tmp_path is None and shell.tmpdir:
            tmp_path = shell.tmpdir
        if isinstance(tmp_path, str) and (force or self._should_remove_tmp_path(tmp_path)) and _mirrored(self):
            try:
                _remove(tmp_path)
            except OSError:
                return remove_original(self, tmp_path, force)
            shell.tmpdir = None
            return None
        return remove_original(self, tmp_path, force)

    ActionBase._make_tmp_path = _make_tmp_path
    ActionBase._remove_tmp_path = _remove_tmp_path
