"""Becoming a new process in a forked child: the one copy of the set-up every warm fork does.

Three places fork a warm process and let the child stand in for a process Ansible would have started:
the zygote forks a run's ``ansible-playbook`` (``zygote``), an Ansible worker forks a module's Python
interpreter (``inworker``), the module server forks a module's interpreter for the runner executor
(``modserver``). Each child must look like the process it replaces, not like its parent: the signal
handling a new Python process has, its own standard streams, the environment and working directory it was
given (and the temp dir that environment's ``TMPDIR`` names), a ``SystemExit`` turned into an exit status
as the interpreter does, and an ``os._exit`` at the end (never the parent's ``atexit`` handlers or
``finally`` blocks; what the child's own exit handlers would have removed, ``end`` removes).
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import shutil
import signal
import sys
import tempfile
import traceback
import types
from collections.abc import Mapping
from typing import NoReturn

from hybrid_operator.ansible.runsite import sitecustomize


def reset_signals() -> None:
    """Signal handling as a new Python process has it: default dispositions, no wakeup fd, no pending
    alarm (a worker's task timeout is the worker's), SIGPIPE ignored and SIGINT raising KeyboardInterrupt
    as the interpreter sets them."""
    signal.set_wakeup_fd(-1)
    signal.alarm(0)
    for signum in (signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def redirect(stdin: int | None, stdout: int, stderr: int) -> None:
    """Point file descriptors 0, 1 and 2 at these (``stdin`` None: /dev/null)."""
    flush_std()
    null = os.open(os.devnull, os.O_RDONLY) if stdin is None else None
    os.dup2(null if null is not None else stdin, 0)  # type: ignore[arg-type]
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    if null is not None:
        os.close(null)


def fresh_std_streams() -> None:
    """New ``sys.stdin/stdout/stderr`` on descriptors 0-2, unbuffered for writing, as a pipe gets them."""
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)


def enter(env: Mapping[str, str], cwd: str | None, replace_env: bool) -> None:
    """Take the given environment (on top of the inherited one unless ``replace_env``) and directory."""
    if replace_env:
        os.environ.clear()
    os.environ.update(env)
    sitecustomize.bound_memory()  # as a new interpreter of a run bounds itself (--ansible-run-memory)
    tempfile.tempdir = None  # as in a new interpreter: the temp dir comes from this environment's TMPDIR
    _inherited_mp_temp_dir[:] = [_multiprocessing_temp_dir()]
    if cwd:
        os.chdir(cwd)


def exit_status(exc: SystemExit) -> int:
    """The exit status the interpreter gives a ``SystemExit``; a message as its code goes to stderr."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    with contextlib.suppress(Exception):
        print(exc.code, file=sys.stderr)
    return 1


def run_as_main(code: bytes, filename: str = "<stdin>") -> int:
    """Run ``code`` as the ``__main__`` module of a new interpreter (``python < code``); its exit status."""
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    sys.argv = [""]
    try:
        exec(compile(code, filename, "exec"), main.__dict__)  # this process *is* the interpreter it was written for
    except SystemExit as exc:
        return exit_status(exc)
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
        return 1
    return 0


def end(code: int, tell: int | None = None) -> NoReturn:
    """Leave the child now: flush what it wrote, remove what a normal exit would have (the temp dir
    multiprocessing made here), and never run the parent's clean-up.

    ``tell``: a pipe the parent reads; it gets the exit status (one byte) once the output is flushed, so the
    parent knows the outcome before the kernel has torn this process down and reported it (milliseconds for
    a fork of a large process)."""
    flush_std()
    if tell is not None:
        with contextlib.suppress(OSError):
            os.write(tell, bytes([code & 0xFF]))
    _remove_multiprocessing_temp_dir()
    os._exit(code & 0xFF)


# multiprocessing makes one temp dir per process for its Unix sockets (ansible-core 2.21's RPC host serves a
# run's workers over one) and removes it from its exit handler, which ``os._exit`` skips: every forked run
# left an empty ``pymp-*`` dir behind. ``enter`` notes the dir the child inherited (its parent's, never
# ours to remove); ``end`` removes the one the child made itself.
_inherited_mp_temp_dir: list[str | None] = []


def _multiprocessing_temp_dir() -> str | None:
    """This process's multiprocessing temp dir, if it has made (or inherited) one."""
    try:
        import multiprocessing.process

        tempdir = multiprocessing.process.current_process()._config.get("tempdir")  # type: ignore[attr-defined]
    except Exception:  # another shape of multiprocessing's internals: leave it alone
        return None
    return tempdir if isinstance(tempdir, str) else None


def _remove_multiprocessing_temp_dir() -> None:
    if not _inherited_mp_temp_dir:  # never entered: nothing of ours to tell apart from the parent's
        return
    tempdir = _multiprocessing_temp_dir()
    if tempdir is not None and tempdir != _inherited_mp_temp_dir[0]:
        shutil.rmtree(tempdir, ignore_errors=True)
