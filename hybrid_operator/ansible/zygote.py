"""The zygote: a warm Ansible process that forks one child per run (the far side of ``warm``).

``warm.WarmExecutor`` starts it as ``python -m hybrid_operator.ansible.zygote --fd N`` with the environment
every run shares already in place: Ansible reads its configuration once, when it is imported, so nothing
per-run may be in it. The zygote checks the ansible-core version, imports Ansible, runs the warm-up playbook
(``selftest.PLAYBOOK``) **in itself**, on Ansible's normal path (the executor's self-test compares a forked
run with it), installs the module hooks (``inworker``), and then serves the executor over the socket it
inherited. For each run it ``fork()``s a child that becomes that run's ``ansible-playbook``: new session,
the run's working directory, environment and output file, Ansible's process-wide caches reset, then
``PlaybookCLI`` and ``os._exit``. The zygote itself never changes after the warm-up, so every run starts
from the same state and nothing a run does reaches the next one.

Why the warm-up runs in the zygote and not in a forked child: a child's warm-up leaves the zygote as cold
as a fresh import (measured: ~0.4 s of CPU per run either way), because most of a run's start-up cost is
Ansible parsing YAML once per process (``ansible.builtin``'s routing table, every loaded plugin's
documentation for its options) into in-memory caches. After a warm-up in the zygote a trivial run costs
~0.1 s of CPU. The price is the process-wide state one run leaves behind; ``compat.PRIVATE_STATE`` lists
what is reset, the zygote refuses to serve if that state is not where this code expects it, and
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
- zygote -> executor: ``{"op": "ready", "pid", "ansible_version", "seconds", "modules_in_worker",
  "why_not_in_worker"}`` or ``{"op": "fatal", "error"}``; per run ``{"op": "started", "id", "pid"}`` then
  ``{"op": "exited", "id", "rc", "timed_out"}``.

End of file on the socket stops the zygote, after it has stopped the runs still going.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import select
import shutil
import signal
import socket
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator.ansible import compat, inworker
from hybrid_operator.privatedirs import new_temp_dir

TIMED_OUT_RC = 254  # what ansible-runner reports for a run it killed at its timeout
KILL_GRACE = 2.0  # seconds between a timed-out run's SIGTERM and the SIGKILL of what is left of it


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


def preload_worker_plugins() -> list[str]:
    """Load in this process what Ansible's workers would otherwise load for every task: the builtin
    Jinja2 filters and tests (all of them, the first time any is used) and the common action plugins.
    What could not be loaded (a worker then loads it itself, as it always does)."""
    from ansible.plugins.loader import action_loader, filter_loader, test_loader

    missing = []
    for loader, name in [(filter_loader, "ansible.builtin.to_json"), (test_loader, "ansible.builtin.truthy")] + [
        (action_loader, name) for name in WORKER_ACTIONS
    ]:
        try:
            found = loader.get(name, class_only=True) if loader is action_loader else loader.get(name)
        except Exception:
            found = None
        if found is None:
            missing.append(name)
    return missing


# ------------------------------------------------------------------------------------------- one run


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
        compat.reset_private_state()
        compat.use_local_tmp(local_tmp)
        compat.fresh_event_contexts()
        warnings.filterwarnings("ignore", message=compat.FINDER_WARNING)  # the zygote configured it already
        code = compat.run_playbook([shutil.which(argv[0], path=os.environ.get("PATH")) or argv[0], *argv[1:]])
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
    """The server: warms up, then forks one child per run and reports how each ended."""

    warms_up_in_itself = True  # the warm-up fills Ansible's private state here (a benchmark variant does not)

    def __init__(self, sock: socket.socket, modules_in_worker: bool = False) -> None:
        self.sock = sock
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
        version = compat.check_version()
        request = self._first_message()
        if request.get("op") != "warm-up":
            raise RuntimeError(f"expected a warm-up request, got {request.get('op')!r}")
        self.tmp_root = compat.use_local_tmp()  # Ansible's configuration is read here, from the shared environment
        import ansible.cli.playbook  # noqa: F401 - the import is the point: it is shared by every run

        run = request["run"]
        rc = self.warm_up(run)
        if rc != 0:
            raise RuntimeError(f"the warm-up playbook failed (exit code {rc}); its output is in {run['output']}")
        preload_worker_plugins()
        in_worker, why = False, "not asked for"
        if self.modules_in_worker:
            problems = inworker.install(os.path.join(self.tmp_root, inworker.SHARED_CACHE_DIR))
            in_worker, why = not problems, "; ".join(problems)
            if in_worker:
                inworker.preload()
        gc.collect()
        problems = compat.private_state_problems(populated=self.warms_up_in_itself)
        if problems:
            raise compat.UnsupportedAnsible(
                f"ansible-core {version} keeps process-wide state where the warm executor does not expect "
                f"it ({'; '.join(problems)})"
            )
        compat.reset_private_state()
        if threading.active_count() != 1:  # forking a multi-threaded process can deadlock the child
            names = ", ".join(thread.name for thread in threading.enumerate())
            raise compat.UnsupportedAnsible(
                f"{threading.active_count()} threads are running after the warm-up: {names}"
            )
        os.set_blocking(self._wake_w, False)
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)  # wakes select() through the wakeup fd
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        seconds = time.monotonic() - started
        ready = {"op": "ready", "pid": os.getpid(), "ansible_version": version, "seconds": seconds}
        self.send({**ready, "modules_in_worker": in_worker, "why_not_in_worker": "" if in_worker else why})

    def warm_up(self, run: dict[str, Any]) -> int:
        """Run the warm-up playbook in this process (Ansible's normal path: the self-test's reference run),
        then drop what that run left behind. Its exit code."""
        saved = os.dup(0), os.dup(1), os.dup(2)
        home = os.getcwd()
        try:
            _redirect_output(run["output"])
            os.chdir(run["cwd"])
            with compat.no_rpc_host():
                rc = compat.run_playbook([str(arg) for arg in run["argv"]])
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
                pid, status = os.waitpid(-1, os.WNOHANG)
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


def main(argv: list[str] | None = None, server: type[Zygote] = Zygote) -> int:
    parser = argparse.ArgumentParser(prog="python -m hybrid_operator.ansible.zygote")
    parser.add_argument("--fd", type=int, required=True, help="the inherited socket to the executor")
    parser.add_argument("--modules-in-worker", action="store_true", help="run modules in Ansible's workers")
    args = parser.parse_args(argv)
    sock = socket.socket(fileno=args.fd)
    zygote = server(sock, modules_in_worker=args.modules_in_worker)
    try:
        zygote.start()
    except Exception as exc:
        with contextlib.suppress(OSError):
            zygote.send({"op": "fatal", "error": str(exc)})
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
