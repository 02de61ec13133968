"""The zygote: a warm Ansible process that forks one child per run (the far side of ``warm``).

``warm.WarmExecutor`` starts it as ``python -m hybrid_operator.ansible.zygote --fd N`` with the
environment every run shares already in place: Ansible reads its configuration once, when it is imported,
so nothing per-run may be in it. The zygote checks the ansible-core version, imports Ansible, runs one
trivial warm-up playbook **in itself**, and then serves the executor over the socket it inherited. For each
run it ``fork()``s a child that becomes that run's ``ansible-playbook``: new session, the run's working
directory, environment and output file, Ansible's process-wide caches reset, then ``PlaybookCLI`` and
``os._exit``. The zygote itself never changes after the warm-up, so every run starts from the same state
and nothing a run does reaches the next one.

Why the warm-up runs in the zygote and not in a forked child: a child's warm-up leaves the zygote as cold
as a fresh import (measured: ~0.4 s of CPU per run either way), because most of a run's start-up cost is
Ansible parsing YAML once per process (``ansible.builtin``'s routing table, every loaded plugin's
documentation for its options) into in-memory caches. After a warm-up in the zygote a trivial run costs
~0.1 s of CPU. The price is the process-wide state one run leaves behind; ``PRIVATE_STATE`` lists what
is reset, the zygote refuses to serve if that state is not where this code expects it, and
``tests/unit/ansible/test_warm_private_state.py`` fails when an ansible-core release moves it. For the
same reason the zygote also loads what Ansible's workers (one fork per task) would load for every task:
the builtin Jinja2 filters and tests and the common action plugins (``preload_worker_plugins``).

A run that outlives its timeout is stopped in two stages: SIGTERM to its ``ansible-playbook``, which
Ansible forwards to its workers, then SIGKILL to every process group of its process tree (each worker
makes its own; killing the run's group alone, as ansible-runner does, leaves the module running).

Protocol: one JSON object per line over a Unix stream socket.

- executor -> zygote: ``{"op": "warm-up", "run": RUN}`` once, then ``{"op": "run", "id": N, "run": RUN}``;
  ``RUN`` is ``{"argv", "env", "cwd", "output", "timeout", "cold"}`` (``cold``: exec the real
  ``ansible-playbook`` instead, for a run whose environment changes Ansible's configuration).
- zygote -> executor: ``{"op": "ready", "pid", "ansible_version", "seconds"}`` or ``{"op": "fatal",
  "error"}``; per run ``{"op": "started", "id", "pid"}`` then ``{"op": "exited", "id", "rc", "timed_out", "cpu"}``.

End of file on the socket stops the zygote, after it has stopped the runs still going.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import secrets
import select
import shutil
import signal
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator.ansible import inworker
from hybrid_operator.privatedirs import new_temp_dir

# The ansible-core releases whose process-wide state this module knows how to reset (pyproject pins the same).
SUPPORTED_ANSIBLE = ((2, 19), (2, 22))  # >= first, < second
TIMED_OUT_RC = 254  # what ansible-runner reports for a run it killed at its timeout
KILL_GRACE = 2.0  # seconds between a timed-out run's SIGTERM and the SIGKILL of what is left of it
_FINDER_WARNING = "AnsibleCollectionFinder has already been configured"


class UnsupportedAnsible(RuntimeError):
    """This ansible-core is outside the range the warm executor supports, or moved its private state."""


def ansible_version() -> tuple[int, int, str]:
    from ansible.release import __version__  # light: does not load Ansible's configuration

    major, minor = (int(part) for part in __version__.split(".")[:2])
    return major, minor, __version__


def check_version() -> str:
    major, minor, full = ansible_version()
    low, high = SUPPORTED_ANSIBLE
    if not low <= (major, minor) < high:
        raise UnsupportedAnsible(
            f"ansible-core {full} is not supported by the warm executor (it needs >={low[0]}.{low[1]},"
            f"<{high[0]}.{high[1]}); install a supported ansible-core or use the runner executor"
        )
    return full


# ----------------------------------------------------------------------------- Ansible's process-wide state


@dataclass(frozen=True)
class PrivateState:
    """One piece of process-wide state a playbook run leaves behind, and how to find it."""

    name: str
    why: str
    present: Callable[[], bool]  # the attribute exists where we reset it
    populated: Callable[[], bool]  # a run has filled it (true right after the zygote's warm-up)
    since: tuple[int, int] = (2, 19)


def _global_cli_args() -> Any:
    from ansible.utils.context_objects import GlobalCLIArgs

    return GlobalCLIArgs


def _vault_context() -> Any:
    from ansible.parsing import vault

    return getattr(vault, "VaultSecretsContext", None)


def _vars() -> Any:
    from ansible.utils import vars as ansible_vars

    return ansible_vars


def _display() -> Any:
    from ansible.utils.display import Display

    return Display()


def _rpc_host() -> Any:
    try:
        from ansible._internal import _rpc_host  # ansible-core >= 2.21
    except ImportError:
        return None
    return _rpc_host


def _rpc_host_in_shape() -> bool:
    module = _rpc_host()
    manager = getattr(module, "LocalManager", None)
    return (
        manager is not None
        and "_shared_instance" in vars(manager)
        and isinstance(vars(manager).get("shared_instance"), classmethod)
        and hasattr(getattr(module, "_server_ready", None), "clear")
    )


def _cli_args_are_global() -> bool:
    from ansible import context

    return isinstance(context.CLIARGS, _global_cli_args())


PRIVATE_STATE = (
    PrivateState(
        "GlobalCLIArgs singleton",
        "holds the parsed command line; a second parse would return the first run's",
        lambda: "_Singleton__instance" in vars(_global_cli_args()),
        lambda: getattr(_global_cli_args(), "_Singleton__instance", None) is not None,
    ),
    PrivateState(
        "ansible.context.CLIARGS",
        "the parsed command line every part of Ansible reads",
        lambda: hasattr(__import__("ansible.context").context, "CLIARGS"),
        _cli_args_are_global,
    ),
    PrivateState(
        "VaultSecretsContext._current",
        "the vault secrets of the run; initialising it twice raises",
        lambda: _vault_context() is not None and "_current" in vars(_vault_context()),
        lambda: getattr(_vault_context(), "_current", None) is not None,
        since=(2, 19),
    ),
    PrivateState(
        "load_extra_vars.extra_vars",
        "a function-attribute cache of the run's extra vars: the next run would get these",
        lambda: callable(getattr(_vars(), "load_extra_vars", None)),
        lambda: hasattr(_vars().load_extra_vars, "extra_vars"),
    ),
    PrivateState(
        "load_options_vars.options_vars",
        "a function-attribute cache of ansible_check_mode, ansible_verbosity and friends",
        lambda: callable(getattr(_vars(), "load_options_vars", None)),
        lambda: hasattr(_vars().load_options_vars, "options_vars"),
    ),
    PrivateState(
        "ansible.utils.vars.random_int / cur_id",
        "the per-process part of task and play uuids; forks would all share the zygote's",
        lambda: isinstance(getattr(_vars(), "random_int", None), str) and isinstance(_vars().cur_id, int),
        lambda: _vars().cur_id > 0,
    ),
    PrivateState(
        "Display de-duplication sets",
        "warnings and deprecations already shown once are not shown again",
        lambda: all(hasattr(getattr(_display(), n, None), "clear") for n in ("_warns", "_deprecations", "_errors")),
        lambda: True,
    ),
    PrivateState(
        "ansible._internal._rpc_host.LocalManager._shared_instance",
        "the in-process RPC server (two threads) the workers of a run call back into; a fork must start its own",
        _rpc_host_in_shape,
        lambda: True,  # not started in the zygote (``no_rpc_host``): nothing to fill in
        since=(2, 21),
    ),
    PrivateState(
        "ansible.constants.DEFAULT_LOCAL_TMP",
        "the process's local temp dir (AnsiballZ cache, rendered templates): one per run, as a new process",
        lambda: isinstance(getattr(__import__("ansible.constants").constants, "DEFAULT_LOCAL_TMP", None), str),
        lambda: True,
    ),
)


def private_state_problems(populated: bool, version: tuple[int, int] | None = None) -> list[str]:
    """What of ``PRIVATE_STATE`` is not where this module expects it in the installed ansible-core.

    ``populated``: also require that a run has filled it in (the zygote checks this after its warm-up,
    which proves the reset targets are the ones a real run uses).
    """
    if version is None:
        major, minor, _full = ansible_version()
        version = (major, minor)
    problems = []
    for state in PRIVATE_STATE:
        if version < state.since:
            continue
        try:
            if not state.present():
                problems.append(f"{state.name}: not found")
            elif populated and not state.populated():
                problems.append(f"{state.name}: a run did not fill it in")
        except Exception as exc:  # an import or attribute error is the same news: the shape changed
            problems.append(f"{state.name}: {type(exc).__name__}: {exc}")
    return problems


def reset_private_state() -> None:
    """Put Ansible's process-wide state back as a fresh ``ansible-playbook`` process has it."""
    from ansible import context
    from ansible.utils.context_objects import CLIArgs

    type.__setattr__(_global_cli_args(), "_Singleton__instance", None)
    context.CLIARGS = CLIArgs({})
    vault_context = _vault_context()
    if vault_context is not None:
        vault_context._current = None
    ansible_vars = _vars()
    for function, cache in (
        (ansible_vars.load_extra_vars, "extra_vars"),
        (ansible_vars.load_options_vars, "options_vars"),
    ):
        with contextlib.suppress(AttributeError):
            delattr(function, cache)
    ansible_vars.random_int = f"{secrets.randbelow(ansible_vars._MAXSIZE):08x}"[:8]
    ansible_vars.cur_id = 0
    display = _display()
    for name in ("_warns", "_deprecations", "_errors"):
        getattr(display, name).clear()
    rpc_host = _rpc_host()
    if rpc_host is not None:  # the run starts its own RPC server, and its workers call that one
        rpc_host.LocalManager._shared_instance = None
        rpc_host._server_ready.clear()


@contextlib.contextmanager
def no_rpc_host() -> Iterator[None]:
    """Run a playbook in this process without starting ansible-core's in-process RPC server (2.21 and
    later: a thread pool and a socket accepter thread, for workers' ``add_host`` and ``group_by``).

    The server cannot be stopped once started, and a process with threads must not fork; the warm-up
    playbook uses neither task, and each run starts its own server in its own fork.
    """
    rpc_host = _rpc_host()
    if rpc_host is None or not _rpc_host_in_shape():  # older ansible-core; or moved: the thread check says so
        yield
        return
    manager = rpc_host.LocalManager
    original = vars(manager)["shared_instance"]
    manager.shared_instance = classmethod(lambda cls: None)
    try:
        yield
    finally:
        manager.shared_instance = original


def use_local_tmp(path: str) -> None:
    """Give this process its own local temp dir (Ansible makes one per process at import)."""
    from ansible import constants

    constants.DEFAULT_LOCAL_TMP = path


def fresh_event_contexts() -> int:
    """Re-create ansible-runner's ``awx_display`` event context from this process's environment.

    The callback reads ``AWX_ISOLATED_DATA_DIR`` (where to write job events) when its module is imported
    and keeps playbook-level context between events; after the warm-up it holds the warm-up run's.
    Returns how many loaded copies of the callback module were found.
    """
    found = 0
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").endswith("awx_display") and hasattr(module, "EventContext"):
            callback: Any = module
            callback.event_context = callback.EventContext()
            found += 1
    return found


# The action plugins behind the builtin tasks roles use most. Ansible loads action plugins in its worker
# processes, one fork per task, so the warm-up playbook loading them does not help the runs that follow;
# loaded here, in the zygote itself, every worker of every run inherits them.
WORKER_ACTIONS = (
    "ansible.legacy.normal",  # every module task without an action plugin of its own
    "ansible.builtin.command",
    "ansible.builtin.debug",
    "ansible.builtin.set_fact",
    "ansible.builtin.assert",
    "ansible.builtin.fail",
    "ansible.builtin.template",
    "ansible.builtin.copy",
    "ansible.builtin.include_vars",
)


def preload_worker_plugins() -> None:
    """Load in this process what Ansible's workers would otherwise load for every task: the builtin
    Jinja2 filters and tests (all of them, the first time any is used) and the common action plugins."""
    from ansible.plugins.loader import action_loader, filter_loader, test_loader

    filter_loader.get("ansible.builtin.to_json")
    test_loader.get("ansible.builtin.truthy")
    for name in WORKER_ACTIONS:
        action_loader.get(name, class_only=True)


# ------------------------------------------------------------------------------------------- one run


def _playbook(argv: list[str]) -> int:
    """Be ``ansible-playbook ARGV`` in this process; its exit code."""
    from ansible.cli.playbook import PlaybookCLI

    sys.argv = list(argv)
    try:
        PlaybookCLI.cli_executor(list(argv))
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _redirect_output(path: str) -> None:
    """stdin from /dev/null; stdout and stderr into one file, as a terminal would interleave them."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)
    # Under ansible-runner, stdout is a terminal and so line-buffered: keep the same order of output.
    with contextlib.suppress(Exception):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]


def _child(run: dict[str, Any], local_tmp: str, close_fds: list[int]) -> None:
    """In the forked child: become the run's ansible-playbook. Never returns."""
    code = 1
    try:
        os.setsid()  # the run's own session: a timeout kills it whole, workers and modules included
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in any new Python process
        for fd in close_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        _redirect_output(run["output"])
        os.chdir(run["cwd"])
        os.environ.clear()
        os.environ.update(run["env"])
        argv = [str(arg) for arg in run["argv"]]
        if run.get("cold"):
            program = shutil.which(argv[0], path=os.environ.get("PATH")) or argv[0]
            os.execve(program, [program, *argv[1:]], dict(os.environ))
        reset_private_state()
        use_local_tmp(local_tmp)
        fresh_event_contexts()
        warnings.filterwarnings("ignore", message=_FINDER_WARNING)  # the zygote configured it already
        code = _playbook([shutil.which(argv[0], path=os.environ.get("PATH")) or argv[0], *argv[1:]])
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


# ------------------------------------------------------------------------------------------- stopping a run


def process_groups(leader: int) -> set[int]:
    """The process groups of a run's process tree, read from /proc: the run's own, and the one each of
    Ansible's worker processes makes for itself (a worker calls ``setsid``, so killing the run's group
    alone leaves the workers and their modules running; ansible-runner has that leak)."""
    children: dict[int, list[int]] = {}
    group_of: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # after "(comm)", which may hold spaces
        except (OSError, IndexError):
            continue
        pid, ppid, pgid = int(entry.name), int(fields[1]), int(fields[2])
        children.setdefault(ppid, []).append(pid)
        group_of[pid] = pgid
    groups, stack = {leader}, [leader]
    while stack:
        for child in children.get(stack.pop(), []):
            groups.add(group_of[child])
            stack.append(child)
    groups.discard(os.getpgrp())  # never our own (a run cannot be in it: it made its own session)
    return groups


def terminate(leader: int) -> set[int]:
    """First stage of stopping a run: SIGTERM to its ``ansible-playbook``, which Ansible forwards to its
    workers and they to their modules. Returns the process groups to SIGKILL a moment later."""
    groups = process_groups(leader)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(leader, signal.SIGTERM)
    return groups


def kill(groups: set[int]) -> None:
    """Second stage: SIGKILL whatever is left in the run's process groups."""
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


# ------------------------------------------------------------------------------------------- the server


@dataclass
class _Running:
    run_id: int
    pid: int
    deadline: float | None
    local_tmp: str
    timed_out: bool = False
    kill_at: float | None = None  # second stage of a timeout: SIGKILL these groups then
    groups: set[int] = field(default_factory=set)
    exited: dict[str, Any] | None = None  # reaped, report held back until the second stage is done


class Zygote:
    def __init__(self, sock: socket.socket, warm_up: str, modules_in_worker: bool = False) -> None:
        self.sock = sock
        self.warm_up_mode = warm_up
        self.modules_in_worker = modules_in_worker
        self.running: dict[int, _Running] = {}
        self._buffer = b""
        self._wake_r, self._wake_w = os.pipe()
        self._stopping = False
        self._local_tmps: dict[int, str] = {}  # pid -> that run's own local temp dir
        self.tmp_root = ""

    # -- messages

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def _messages(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def _first_message(self) -> dict[str, Any]:
        while True:
            data = self.sock.recv(1 << 16)
            if not data:
                raise EOFError("the executor hung up before the warm-up")
            messages = self._messages(data)
            if messages:
                return messages[0]

    # -- start-up

    def start(self) -> None:
        started = time.monotonic()
        version = check_version()
        request = self._first_message()
        if request.get("op") != "warm-up":
            raise RuntimeError(f"expected a warm-up request, got {request.get('op')!r}")
        from ansible import constants  # Ansible's configuration is read here, from the shared environment

        self.tmp_root = str(constants.DEFAULT_LOCAL_TMP)
        import ansible.cli.playbook  # noqa: F401 - the import is the point: it is shared by every run

        run = request["run"]
        if self.warm_up_mode == "zygote":
            rc = self._warm_up_here(run)
            preload_worker_plugins()
        elif self.warm_up_mode == "child":
            rc = self._warm_up_in_child(run)
        else:
            rc = 0
        if rc == 0 and self.modules_in_worker:
            inworker.install(os.path.join(self.tmp_root, inworker.SHARED_CACHE_DIR))
            inworker.preload()
            gc.collect()
        if rc != 0:
            raise RuntimeError(f"the warm-up playbook failed (exit code {rc}); its output is in {run['output']}")
        problems = private_state_problems(populated=self.warm_up_mode == "zygote")
        if problems:
            raise UnsupportedAnsible(
                f"ansible-core {version} keeps process-wide state where the warm executor does not expect "
                f"it ({'; '.join(problems)}); use the runner executor"
            )
        reset_private_state()
        if threading.active_count() != 1:  # forking a multi-threaded process can deadlock the child
            raise RuntimeError(f"{threading.active_count()} threads are running after the warm-up")
        os.set_blocking(self._wake_w, False)
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)  # wakes select() through the wakeup fd
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        self.send(
            {"op": "ready", "pid": os.getpid(), "ansible_version": version, "seconds": time.monotonic() - started}
        )

    def _warm_up_here(self, run: dict[str, Any]) -> int:
        """Run the warm-up playbook in this process, then drop what that run left behind."""
        saved = os.dup(0), os.dup(1), os.dup(2)
        home = os.getcwd()
        try:
            _redirect_output(run["output"])
            os.chdir(run["cwd"])
            with no_rpc_host():
                rc = _playbook([str(arg) for arg in run["argv"]])
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, saved_fd in enumerate(saved):
                os.dup2(saved_fd, fd)
                os.close(saved_fd)
            os.chdir(home)
        # The run's TaskQueueManager left its SIGINT/SIGTERM handlers (bound to itself) installed.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        gc.collect()
        return rc

    def _warm_up_in_child(self, run: dict[str, Any]) -> int:
        """The warm-up in a forked child: proves Ansible works, warms only the disk cache."""
        pid = self._fork(run)
        _pid, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    # -- serving

    def _fork(self, run: dict[str, Any]) -> int:
        local_tmp = str(new_temp_dir("run-", self.tmp_root))
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(run, local_tmp, [self.sock.fileno(), self._wake_r, self._wake_w])
        self._local_tmps[pid] = local_tmp
        return pid

    def serve(self) -> None:
        while not self._stopping:
            watched: list[socket.socket | int] = [self.sock, self._wake_r]
            readable, _w, _x = select.select(watched, [], [], self._select_timeout())
            if self._wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
            self._reap()
            self._kill_overdue()
            if self.sock in readable:
                data = self.sock.recv(1 << 16)
                if not data:
                    break
                for message in self._messages(data):
                    self._handle(message)
        self._stop_all()

    def _select_timeout(self) -> float | None:
        moments = [r.deadline for r in self.running.values() if r.deadline is not None and not r.timed_out]
        moments += [r.kill_at for r in self.running.values() if r.kill_at is not None]
        if not moments:
            return None
        return max(0.0, min(moments) - time.monotonic())

    def _handle(self, message: dict[str, Any]) -> None:
        if message.get("op") != "run":
            return
        run = message["run"]
        pid = self._fork(run)
        timeout = run.get("timeout")
        deadline = time.monotonic() + float(timeout) if timeout else None
        self.running[pid] = _Running(int(message["id"]), pid, deadline, self._local_tmps[pid])
        self.send({"op": "started", "id": message["id"], "pid": pid})

    def _reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            shutil.rmtree(self._local_tmps.pop(pid, ""), ignore_errors=True)
            running = self.running.get(pid)
            if running is None:
                continue
            running.exited = {
                "op": "exited",
                "id": running.run_id,
                "rc": TIMED_OUT_RC if running.timed_out else os.waitstatus_to_exitcode(status),
                "timed_out": running.timed_out,
                "cpu": usage.ru_utime + usage.ru_stime,  # the run's process and all it waited for
            }
            if running.kill_at is None:
                self._report(running)

    def _report(self, running: _Running) -> None:
        del self.running[running.pid]
        self.send(running.exited or {})

    def _kill_overdue(self) -> None:
        now = time.monotonic()
        for running in list(self.running.values()):
            if running.deadline is not None and not running.timed_out and now >= running.deadline:
                running.timed_out = True
                running.groups = terminate(running.pid)  # the leader is not reaped yet: its pid is its own
                running.kill_at = now + KILL_GRACE
            elif running.kill_at is not None and now >= running.kill_at:
                kill(running.groups)
                running.kill_at = None
                if running.exited is not None:
                    running.exited["rc"], running.exited["timed_out"] = TIMED_OUT_RC, True
                    self._report(running)

    def _on_term(self, _signum: int, _frame: object) -> None:
        self._stopping = True

    def _stop_all(self) -> None:
        """The executor went away: stop every run (as at a timeout, without the wait between stages)."""
        groups = [terminate(pid) for pid in self.running]
        time.sleep(0.2 if groups else 0)
        for run_groups in groups:
            kill(run_groups)
        for pid in list(self.running):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            shutil.rmtree(self._local_tmps.pop(pid, ""), ignore_errors=True)
        self.running.clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hybrid_operator.ansible.zygote")
    parser.add_argument("--fd", type=int, required=True, help="the inherited socket to the executor")
    parser.add_argument("--warm-up", choices=("zygote", "child", "none"), default="zygote")
    parser.add_argument("--modules-in-worker", action="store_true", help="run modules in Ansible's workers")
    args = parser.parse_args(argv)
    sock = socket.socket(fileno=args.fd)
    zygote = Zygote(sock, args.warm_up, modules_in_worker=args.modules_in_worker)
    try:
        zygote.start()
    except Exception as exc:
        with contextlib.suppress(OSError):
            zygote.send({"op": "fatal", "error": str(exc), "unsupported": isinstance(exc, UnsupportedAnsible)})
        print(f"zygote: {exc}", file=sys.stderr)
        return 2
    try:
        zygote.serve()
    except (ConnectionError, OSError) as exc:
        print(f"zygote: lost the executor: {exc}", file=sys.stderr)
        zygote._stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
