"""Directories only this operator may write: made private, or refused when someone else could have planted them.

The operator keeps state another local user must never supply: the runner artifacts dir (every run's input
and the wrapper playbooks it runs), the per-run kubeconfigs holding the API proxy's secret, the executors'
scratch dirs (the warm Ansible's home, the module server's socket and interpreter, each run's local temp
dir). Whatever is found in such a dir is run or trusted, so a dir that already exists is used only if it
is a real directory (not a symbolic link), belongs to this process's user and gives group and others no
access at all; and no existing parent of it may belong to a third user, who could move it aside and put
their own in its place. Anything else is a ``ConfigError`` naming the path, its owner and mode, and what to
do. Missing dirs, and their missing parents, are created with mode 0700.

The mode of existing parents is not checked: a shared sticky ``/tmp`` is the usual place for them, and a
pod's emptyDir ``/tmp`` (mode 0777, no sticky bit) is shared with the pod's own processes only.

``TempDir`` is a fresh private dir (``tempfile.mkdtemp``: a new random name, mode 0700) that is removed by
``close()``, on leaving its ``with`` block, or at the latest when the process exits normally.

Used by ``ansible`` (artifact store, wrapper playbooks, warm executor, module server, zygote) and
``reactor.reconciling`` (per-run kubeconfigs).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import stat
import tempfile
import threading
from pathlib import Path
from types import TracebackType

from hybrid_operator.errors import ConfigError

ROOT_UID = 0


def ensure_private_dir(path: Path | str, purpose: str = "directory") -> Path:
    """Create ``path`` (and any missing parents) with mode 0700, or check that the existing one is private.

    Returns the path with its parents' symbolic links resolved: use that one from then on, so that a link
    changed later cannot redirect the operator. ``purpose`` names the dir in the error, e.g. the flag.
    """
    path = Path(os.path.abspath(path))
    missing: list[Path] = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    _check_parents(probe if missing else probe.parent, path, purpose)
    for component in reversed(missing):
        try:
            os.mkdir(component, 0o700)
        except FileExistsError:
            pass  # appeared since we looked: checked below like every dir of ours
        except OSError as exc:
            raise ConfigError(f"cannot create {purpose} {path}: {component}: {exc.strerror}") from exc
        _check_private(component, purpose, path)
    if not missing:
        _check_private(path, purpose, path)
    # Once more where the links point now: one changed while we looked must not have led us elsewhere.
    real = path.parent.resolve() / path.name
    _check_parents(real.parent, path, purpose)
    _check_private(real, purpose, path)
    return real


def check_private_dir(path: Path | str, purpose: str = "directory") -> None:
    """Raise ``ConfigError`` unless ``path`` is a real directory of ours with no access for group or others."""
    _check_private(Path(path), purpose, Path(path))


def new_temp_dir(prefix: str, parent: Path | str | None = None) -> Path:
    """A new private dir (mode 0700, a fresh random name) under ``parent`` or the temp dir; the caller
    removes it. The process id is part of the name, so a dir left behind says whose it was."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
    _check_private(path, "temporary directory", path)
    return path


def write_private_file(path: Path, text: str) -> Path:
    """Write ``path`` (mode 0600) whole or not at all: a new file of ours renamed over whatever was there.

    The temporary name is created exclusively and without following links, so nothing planted under it
    is written through; the rename replaces a planted ``path`` rather than opening it.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


class TempDir:
    """A new private dir, removed by ``close()`` (idempotent), at the end of a ``with`` block, or at exit."""

    def __init__(self, prefix: str, parent: Path | str | None = None) -> None:
        self.path = new_temp_dir(prefix, parent)
        self._owner_pid = os.getpid()
        with _live_lock:
            _live[self.path] = self._owner_pid

    def close(self) -> None:
        with _live_lock:
            _live.pop(self.path, None)
        if os.getpid() == self._owner_pid:  # a forked child must not remove its parent's dir
            shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> Path:
        return self.path

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


# Temp dirs not closed yet, and the process that made each: removed at exit if their owner forgot (an
# error during start-up, say). Only by that process: a forked child exiting must not take them along.
_live: dict[Path, int] = {}
_live_lock = threading.Lock()


@atexit.register
def _remove_leftovers() -> None:
    with _live_lock:
        doomed = [path for path, pid in _live.items() if pid == os.getpid()]
        _live.clear()
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)


def _check_private(path: Path, purpose: str, wanted: Path) -> None:
    where = f"{purpose} {wanted}" + (f" (at {path})" if path != wanted else "")
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ConfigError(f"cannot use {where}: {exc.strerror}") from exc
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        raise ConfigError(
            f"refusing to use {where}: it is a symbolic link (to {os.readlink(path)}), owned by uid {st.st_uid}; "
            "give the real directory, or remove the link"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"refusing to use {where}: it exists and is not a directory")
    if st.st_uid != os.geteuid():
        raise ConfigError(
            f"refusing to use {where}: it belongs to uid {st.st_uid} (mode {mode:04o}), not to this operator's "
            f"uid {os.geteuid()}, so whatever is in it may have been planted; remove it after checking its "
            "contents, or give a directory of your own"
        )
    if mode & 0o077:
        raise ConfigError(
            f"refusing to use {where}: its mode {mode:04o} lets group or others in (it must be 0700), so "
            f"whatever is in it may have been planted or read; if everything in it is yours run "
            f"'chmod 700 {path}', else remove it or give another directory"
        )


def _check_parents(start: Path, wanted: Path, purpose: str) -> None:
    """Every existing parent must belong to root or to us: its owner could rename our dir and plant theirs."""
    real = start.resolve()
    for parent in (real, *real.parents):
        try:
            owner = os.stat(parent).st_uid
        except OSError as exc:
            raise ConfigError(f"cannot use {purpose} {wanted}: {parent}: {exc.strerror}") from exc
        if owner not in (ROOT_UID, os.geteuid()):
            raise ConfigError(
                f"refusing to use {purpose} {wanted}: its parent {parent} belongs to uid {owner}, who could "
                f"replace it with a directory of their own; give a directory whose parents belong to root or "
                f"to uid {os.geteuid()}"
            )
