"""The zygote: a warm Ansible process that forks one child per run (the server side of the warm executor).

``zygoteclient.ZygoteClient`` starts it as ``python -P -m hybrid_operator.ansible.warm.zygote --fd N`` with the
environment every run shares already in place: Ansible reads its configuration once, when it is imported,
so nothing per-run may be in it. The zygote checks the ansible-core version, imports Ansible, runs the
warm-up playbook (``selftest.PLAYBOOK``) **in itself**, on Ansible's normal path (the executor's self-test
compares a forked run with it), installs the module hooks (``inworker``) and the in-process task path
(``inline``), sets its heap aside (``heap``: out of the collector's reach and, where CPython allows,
immortal, so a run copies fewer of its pages), and then serves the executor over the socket it inherited
(``protocol``). For each run it ``fork()``s a child that becomes that run's
``ansible-playbook``: new session, the run's working directory, environment and output file
(``forking``), Ansible's process-wide state reset (``compat``), then ``PlaybookCLI`` and ``os._exit``.
Right before that exit the child writes its exit status on a pipe of its own, its output flushed: the
zygote reports the run's end then, not when the kernel has torn the fork down (5-70 ms later), and still
reaps it after, its timeout in force until then. While no run runs, the zygote forks the next run's child
ahead (``spares``): it detaches and resets, then waits for its run, which then starts without a fork.
The zygote itself never changes after the warm-up, so every run starts from the same state and nothing a
run does reaches the next one.

Why the warm-up runs in the zygote and not in a forked child: a child's warm-up leaves the zygote as cold
as a fresh import (measured: ~0.4 s of CPU per run either way; ``bench/executors.py --warm-up child``),
because most of a run's start-up cost is Ansible parsing YAML once per process (``ansible.builtin``'s
routing table, every loaded plugin's documentation for its options) into in-memory caches. After a
warm-up in the zygote a trivial run costs ~0.1 s of CPU. The price is the process-wide state one run
leaves behind: ``compat.PRIVATE_STATE`` lists what is reset, and the zygote refuses to serve if that
state is not where ``compat`` expects it. For the same reason the zygote also loads what Ansible's
workers (one fork per task) would load for every task: the builtin Jinja2 filters and tests and the
common action plugins, and the action plugins its roles name (``actions``), and loads the playbooks its
runs will load (``plays``).

A run that outlives its timeout is stopped with its whole process tree, and what it started outside it (``reaping``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import select
import shutil
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hybrid_operator.ansible import compat, forking
from hybrid_operator.ansible.privatedirs import new_temp_dir
from hybrid_operator.ansible.reaping import KILL_GRACE, RUN_ENV, kill, terminate
from hybrid_operator.ansible.runsite import sitecustomize
from hybrid_operator.ansible.warm import (
    actions,
    child,
    heap,
    inline,
    inworker,
    lean,
    payloads,
    plays,
    plugindocs,
    project,
    protocol,
    smallhooks,
    spares,
)


@dataclass
class _Running:
    run_id: int
    pid: int
    deadline: float | None
    timed_out: bool = False
    kill_at: float | None = None  # second stage of a timeout: SIGKILL these groups then
    groups: set[int] = field(default_factory=set)
    exited: protocol.Exited | None = None  # reaped, report held back until the second stage is done
    reported: bool = False  # its end was reported when it said it was done, before it was reaped
    mark: str = ""  # the run's id in its processes' environment (``reaping.RUN_ENV``)


class ZygoteServer:
    """Warms up, then forks one child per run and reports how each ended."""

    warms_up_in_itself = True  # the warm-up fills Ansible's private state here (a benchmark variant does not)

    def __init__(self, sock: socket.socket, modules_in_worker: bool = False, inline_tasks: bool = False) -> None:
        self.sock = sock
        self.modules_in_worker = modules_in_worker
        self.inline_tasks = inline_tasks
        self.running: dict[int, _Running] = {}
        self._reader = protocol.LineReader()
        self._wake_r, self._wake_w = os.pipe()
        self._stopping = False
        self._local_tmps: dict[int, str] = {}  # pid -> that run's own local temp dir
        self._done: dict[int, int] = {}  # read end of a run's done pipe -> its pid, until it said or was reaped
        self.tmp_root = ""
        self._builder: int | None = None
        self._prepare: list[Path] = []  # roles (or dirs of roles) to prepare besides the roles path
        self._playbooks: list[str] = []  # playbooks to load ahead for the runs (``plays``)
        self._spare = spares.Slot()  # the next run's child, forked ahead

    def send(self, message: protocol.Message) -> None:
        self.sock.sendall(protocol.encode(message))

    # -- start-up

    def start(self) -> None:
        started = time.monotonic()
        version = compat.check_version()
        request = self._first_message()
        self._prepare = [Path(d) for d in request.prepare]
        self._playbooks = list(request.playbooks)
        self.tmp_root = compat.use_local_tmp()  # Ansible reads its configuration here, from the shared environment
        Path(protocol.LOCAL_TMP_NOTE).write_text(self.tmp_root, encoding="utf-8")  # in the client's dir (cwd)
        import ansible.cli.playbook  # noqa: F401 - the import is the point: it is shared by every run

        docs_problems = plugindocs.install()  # before the warm-up: the plugins it loads are noted
        rc = self.warm_up(request.run)
        if rc != 0:
            from hybrid_operator.ansible.running import load_error

            reason = load_error(Path(request.run.output))
            raise RuntimeError(
                f"the warm-up playbook failed (exit code {rc}): {reason}; its output is in {request.run.output}"
            )
        self.share_plugins(docs_problems)
        if self.inline_tasks and (problems := inline.install()):  # each task forks a worker, as usual
            print(f"zygote: tasks fork Ansible's worker: {'; '.join(problems)}", file=sys.stderr)
        # The lean path sits on the in-process task path and hands the module hooks its runner of API modules.
        not_lean = lean.install() if self.inline_tasks and inline.installed() else ["tasks fork Ansible's worker"]
        in_worker, why = False, "not asked for"
        if self.modules_in_worker:
            in_process = lean.in_process if lean.installed() else None
            problems = inworker.install(os.path.join(self.tmp_root, inworker.SHARED_CACHE_DIR), in_process)
            in_worker, why = not problems, "; ".join(problems)
            if in_worker:
                inworker.preload()
        smallhooks.install()
        payload_names: list[str] = []
        try:
            payload_names = project.prepare_roles(self._prepare)
        except Exception as exc:  # what is not prepared, each run does itself, as without a zygote
            print(f"zygote: roles not prepared ahead: {type(exc).__name__}: {exc}", file=sys.stderr)
        plays.report_line(plays.preload(self._playbooks, lean.installed()))
        problems = compat.private_state_problems(populated=self.warms_up_in_itself)
        if problems:
            raise compat.UnsupportedAnsible(
                f"ansible-core {version} keeps process-wide state where the warm executor does not expect "
                f"it ({'; '.join(problems)})"
            )
        compat.reset_private_state()
        compat.note_event_callbacks()
        # What the warm-up left is every run's from here: neither the collector nor reference counts write to
        # its pages in a run (each page written is a page the fork copies).
        settled = heap.settle()
        if threading.active_count() != 1:  # forking a multi-threaded process can deadlock the child
            names = ", ".join(thread.name for thread in threading.enumerate())
            raise compat.UnsupportedAnsible(f"{threading.active_count()} threads run after the warm-up: {names}")
        os.set_blocking(self._wake_w, False)
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)  # wakes select() through the wakeup fd
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        seconds = time.monotonic() - started
        why_not_in_worker = "" if in_worker else why
        self.send(
            protocol.Ready(
                os.getpid(), version, seconds, in_worker, why_not_in_worker, "; ".join(not_lean), settled.describe()
            )
        )
        channels = [self.sock.fileno(), self._wake_r, self._wake_w]
        self._builder = payloads.fork_builder(payload_names, inworker.shareable, channels)

    @staticmethod
    def share_plugins(docs_problems: list[str]) -> None:
        """After the warm-up, what every run would otherwise do again with the plugins it uses."""
        actions.preload_worker_plugins()
        compat.warm_result_mappings()  # what each run's first task result computes
        if problems := compat.quiet_debug_calls():  # every debug call keeps the callback's marking
            print(f"zygote: debug calls marked for events: {'; '.join(problems)}", file=sys.stderr)
        if docs_problems:
            print(f"zygote: plugin documentation parsed in every run: {'; '.join(docs_problems)}", file=sys.stderr)
        else:
            plugindocs.preload_lookups()

    def _first_message(self) -> protocol.WarmUp:
        while True:
            data = self.sock.recv(1 << 16)
            if not data:
                raise EOFError("the executor hung up before the warm-up")
            messages = self._reader.feed(data)
            if messages:
                if not isinstance(messages[0], protocol.WarmUp):
                    raise protocol.ProtocolError(f"expected a warm-up request, got {type(messages[0]).__name__}")
                return messages[0]

    def warm_up(self, run: protocol.RunSpec) -> int:
        """Run the warm-up playbook in this process (Ansible's normal path: the self-test's reference run),
        then drop what that run left behind. Its exit code."""
        saved = os.dup(0), os.dup(1), os.dup(2)
        home = os.getcwd()
        try:
            child.redirect_output(run.output)
            os.chdir(run.cwd)
            with compat.no_rpc_host():
                rc = compat.run_playbook(run.argv)
        finally:
            forking.flush_std()
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

    def fork(self, run: protocol.RunSpec) -> int:
        """Start a run in a forked child; its pid."""
        local_tmp = str(new_temp_dir("run-", self.tmp_root))
        done_r, done_w = os.pipe()  # its own: a child can only ever say that it, itself, is done
        forking.flush_std()
        pid = os.fork()
        if pid == 0:
            child.become_run(run, local_tmp, [*self._own_fds(), done_r], done_w)
        os.close(done_w)
        self._local_tmps[pid] = local_tmp
        self._done[done_r] = pid
        return pid

    def _own_fds(self) -> list[int]:
        """The zygote's descriptors a forked child must close."""
        return [self.sock.fileno(), self._wake_r, self._wake_w, *self._done, *self._spare.fds()]

    def _fork_spare(self) -> None:
        """The next run's child, forked while no run runs (``spares``)."""
        if any(not r.reported and not r.timed_out for r in self.running.values()):
            return
        if not self._stopping and (spare := self._spare.fill(self.tmp_root, self._own_fds())):
            self._local_tmps[spare.pid] = spare.local_tmp

    def serve(self) -> None:
        while not self._stopping:
            self._fork_spare()
            watched: list[socket.socket | int] = [self.sock, self._wake_r, *self._done]
            readable, _w, _x = select.select(watched, [], [], self._select_timeout())
            if self._wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
            for fd in readable:
                if isinstance(fd, int) and fd in self._done:
                    self._said_done(fd)
            self._reap()
            self._kill_overdue()
            if self.sock in readable:
                data = self.sock.recv(1 << 16)
                if not data:
                    break
                for message in self._reader.feed(data):
                    if isinstance(message, protocol.Run):
                        self._start_run(message)
        self.stop_all()

    def _select_timeout(self) -> float | None:
        moments = [r.deadline for r in self.running.values() if r.deadline is not None and not r.timed_out]
        moments += [r.kill_at for r in self.running.values() if r.kill_at is not None]
        if not moments:
            return None
        return max(0.0, min(moments) - time.monotonic())

    def _start_run(self, message: protocol.Run) -> None:
        spare = self._spare.take(message)
        if spare is not None:
            self._done[spare.done] = spare.pid
        pid = spare.pid if spare is not None else self.fork(message.run)
        deadline = time.monotonic() + message.run.timeout if message.run.timeout else None
        self.running[pid] = _Running(message.id, pid, deadline, mark=message.run.env.get(RUN_ENV, ""))
        self.send(protocol.Started(message.id, pid))

    def _said_done(self, fd: int) -> None:
        """A run's child flushed its output and gave its exit status: report its end now; it is reaped (and
        its timeout still applies) as before, without a second report. End of file without a status (it died
        first): the reap reports it."""
        pid = self._done.pop(fd)
        try:
            said = os.read(fd, 1)
        except OSError:
            said = b""
        os.close(fd)
        running = self.running.get(pid)
        if said and running is not None and not running.timed_out and not running.reported:
            running.reported = True
            self.send(protocol.Exited(running.run_id, said[0], False))

    def _forget_done_pipe(self, pid: int) -> None:
        for fd in [fd for fd, owner in self._done.items() if owner == pid]:
            del self._done[fd]
            os.close(fd)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self._builder:
                self._builder = None
            self._spare.reaped(pid)
            shutil.rmtree(self._local_tmps.pop(pid, ""), ignore_errors=True)
            self._forget_done_pipe(pid)
            running = self.running.get(pid)
            if running is None:
                continue
            rc = protocol.TIMED_OUT_RC if running.timed_out else os.waitstatus_to_exitcode(status)
            running.exited = protocol.Exited(running.run_id, rc, running.timed_out)
            if running.kill_at is None:
                self._report(running)

    def _report(self, running: _Running) -> None:
        del self.running[running.pid]
        if running.exited is not None and not running.reported:
            self.send(running.exited)

    def _kill_overdue(self) -> None:
        now = time.monotonic()
        for running in list(self.running.values()):
            if running.deadline is not None and not running.timed_out and now >= running.deadline:
                running.timed_out = True
                # The leader is not reaped yet: its pid is its own. The mark: what left its tree (a detached command).
                running.groups = terminate(running.pid, running.mark)
                running.kill_at = now + KILL_GRACE
            elif running.kill_at is not None and now >= running.kill_at:
                kill(running.groups, running.mark)
                running.kill_at = None
                if running.exited is not None:
                    running.exited = protocol.Exited(running.run_id, protocol.TIMED_OUT_RC, True)
                    self._report(running)

    def _on_term(self, _signum: int, _frame: object) -> None:
        self._stopping = True

    def stop_all(self) -> None:
        """The executor went away: stop every run (as at a timeout, without the wait between stages)."""
        if self._builder is not None:  # what it has not built yet, the next zygote's runs build
            with contextlib.suppress(OSError):
                os.kill(self._builder, signal.SIGKILL)
        if (spare := self._spare.spare) is not None:
            self._spare.stop()
            shutil.rmtree(self._local_tmps.pop(spare.pid, ""), ignore_errors=True)
        stops = [(terminate(pid, running.mark), running.mark) for pid, running in self.running.items()]
        time.sleep(0.2 if stops else 0)
        for groups, mark in stops:
            kill(groups, mark)
        for pid in list(self.running):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            shutil.rmtree(self._local_tmps.pop(pid, ""), ignore_errors=True)
            self._forget_done_pipe(pid)
        self.running.clear()


def main(argv: list[str] | None = None, server: type[ZygoteServer] = ZygoteServer) -> int:
    parser = argparse.ArgumentParser(prog="python -m hybrid_operator.ansible.warm.zygote")
    parser.add_argument("--fd", type=int, required=True, help="the inherited socket to the executor")
    parser.add_argument("--modules-in-worker", action="store_true", help="run modules in Ansible's workers")
    parser.add_argument("--inline-tasks", action="store_true", help="run local tasks without a worker fork")
    args = parser.parse_args(argv)
    sitecustomize.unbound_memory()  # the runs are bounded, each from its own size (forking.enter)
    sock = socket.socket(fileno=args.fd)
    zygote = server(sock, modules_in_worker=args.modules_in_worker, inline_tasks=args.inline_tasks)
    try:
        zygote.start()
    except Exception as exc:
        with contextlib.suppress(OSError):
            zygote.send(protocol.Fatal(str(exc) or type(exc).__name__))
        print(f"zygote: {exc}", file=sys.stderr)
        return 2
    try:
        zygote.serve()
    except (ConnectionError, OSError, protocol.ProtocolError) as exc:
        print(f"zygote: lost the executor: {exc}", file=sys.stderr)
        zygote.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
