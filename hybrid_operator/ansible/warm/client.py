"""The executor's handle on one zygote process: start it, hand it runs, learn how they ended.

Where it sits: ``warm.WarmExecutor`` owns one ``ZygoteClient`` at a time; the process on the other end is
``zygote.ZygoteServer``. They talk over a socket pair in ``protocol``'s messages. A reader thread turns
the zygote's messages into the state of each ``Pending`` run; when the zygote dies (or stops answering),
the runs it had going are stopped with their process trees (``reaping``) and fail with the reason, which
``error`` also keeps for the executor's readiness.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hybrid_operator.ansible.privatedirs import ensure_private_dir
from hybrid_operator.ansible.reaping import KILL_GRACE, RUN_ENV, kill, process_groups, terminate
from hybrid_operator.ansible.runsite import sitecustomize
from hybrid_operator.ansible.warm import inline, protocol

log = logging.getLogger(__name__)

SERVER = ("-m", "hybrid_operator.ansible.warm.zygote")  # the zygote, after ``python -P``
DIED = "the warm Ansible process died"  # why a zygote that ended on its own is gone


class ZygoteError(RuntimeError):
    """The zygote could not start, or died."""


@dataclass
class Pending:
    """One run the zygote was asked for, as the reader thread learns about it."""

    run_id: int
    done: threading.Event = field(default_factory=threading.Event)
    pid: int | None = None
    rc: int = 1
    timed_out: bool = False
    error: str = ""
    mark: str = ""  # the run's id in its processes' environment (``reaping.RUN_ENV``)


class ZygoteClient:
    """One zygote process, seen from the executor. ``server``: how to start it, after ``python -P``."""

    def __init__(self, home: Path, server: tuple[str, ...] = SERVER, modules_in_worker: bool = False) -> None:
        self.home = home
        self.server = server
        self.modules_in_worker = modules_in_worker  # asked for; once ready: whether the zygote could do it
        self.why_not_in_worker = ""
        self.why_not_lean = ""  # once ready: why the zygote's lean path is off (empty: on)
        self.heap = ""  # once ready: what the zygote did with its heap before forking (``heap``)
        self.proc: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        self.ready = threading.Event()
        self.error = ""  # why it failed to start or died; empty while it is fine
        self.ansible_version = ""
        self._sock: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, Pending] = {}
        self._ids = 0
        self._closing = False

    # -- life cycle

    def start(
        self, warm_up: protocol.RunSpec, prepare: list[str] | None = None, playbooks: list[str] | None = None
    ) -> None:
        """Start the process on the warm-up run's environment (returns at once; ``wait_ready`` waits); it
        prepares the roles in (or at) ``prepare`` besides its roles path, and loads ``playbooks`` ahead."""
        self.env = dict(warm_up.env)
        cwd = ensure_private_dir(self.home / "cwd")  # empty: an ansible.cfg in the operator's dir is not read
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        flags = ["--modules-in-worker"] if self.modules_in_worker else []
        if os.environ.get(inline.DISABLE_ENV) != "0":
            flags.append("--inline-tasks")
        with (self.home / "zygote.log").open("ab") as log_file:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", *self.server, "--fd", str(theirs.fileno()), *flags],
                # Not bounded itself: each run it forks is, from the run's own environment (forking.enter).
                env={k: v for k, v in self.env.items() if k != sitecustomize.MEMORY_ENV},
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
                pass_fds=[theirs.fileno()],
                start_new_session=True,  # a Ctrl-C at the operator's terminal must not reach the runs
            )
        theirs.close()
        self._sock = ours
        self._send(protocol.WarmUp(warm_up, list(prepare or []), list(playbooks or [])))
        threading.Thread(target=self._read, name="warm-zygote-reader", daemon=True).start()

    def wait_ready(self, timeout: float) -> None:
        if not self.ready.wait(timeout):
            self._fail(f"the warm Ansible process did not warm up in {timeout:.0f}s")
            self.stop()
        if self.error:
            raise ZygoteError(self.error)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and not self.error

    def stop(self, timeout: float = 10.0) -> None:
        self._closing = True
        if self.proc is not None and not self.ready.is_set():
            # Still warming up: none of our runs is in it, and it reads no end of file before it is done
            # (seconds): a stop would wait for it. It and its warm-up's workers go at once.
            kill(process_groups(self.proc.pid))
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)  # end of file: the zygote kills its runs and exits
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._sock is not None:
            self._sock.close()
        self._remove_local_tmp()

    def _remove_local_tmp(self) -> None:
        """The zygote's local temp dir (the payloads it shares with its runs, their own dirs), which Ansible
        removes when the zygote exits, when the zygote was killed instead: the path it noted at start
        (``protocol.LOCAL_TMP_NOTE``), if it is still the dir Ansible names after that process."""
        if self.proc is None or self.proc.poll() is None:
            return  # not started, or still running: its own
        try:
            path = Path((self.home / "cwd" / protocol.LOCAL_TMP_NOTE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        # Ansible's name for it: tempfile.mkdtemp(prefix=f"ansible-local-{pid}"), 8 random characters after.
        named = re.fullmatch(rf"ansible-local-{self.proc.pid}[a-z0-9_]{{8}}", path.name)
        if path.is_absolute() and named and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)

    # -- runs

    def submit(self, run: protocol.RunSpec) -> Pending:
        with self._lock:
            if self.error:
                raise ZygoteError(self.error)
            self._ids += 1
            pending = Pending(self._ids, mark=run.env.get(RUN_ENV, ""))
            self._pending[pending.run_id] = pending
        try:
            self._send(protocol.Run(pending.run_id, run))
        except OSError as exc:
            self._died(f"could not reach the warm Ansible process: {exc}")
        return pending

    def abandon(self, pending: Pending) -> None:
        """Give up on a run the zygote never reported: kill its session and treat the zygote as broken."""
        groups = terminate(pending.pid, pending.mark)
        if pending.pid:
            time.sleep(KILL_GRACE)
        kill(groups, pending.mark)
        self._fail("the warm Ansible process stopped reporting on its runs")
        self.stop()

    def _send(self, message: protocol.Message) -> None:
        assert self._sock is not None
        data = protocol.encode(message)
        with self._send_lock:
            self._sock.sendall(data)

    # -- the reader thread

    def _read(self) -> None:
        assert self._sock is not None
        reader = protocol.LineReader()
        reason = "the executor closed it"
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                reason = reason if self._closing else DIED
                break
            try:
                for message in reader.feed(data):
                    self._on_message(message)
            except protocol.ProtocolError as exc:
                reason = f"the warm Ansible process sent what is not a message of ours ({exc})"
                self.stop(timeout=2.0)
                break
        self._died(reason)

    def _on_message(self, message: protocol.Message) -> None:
        if isinstance(message, protocol.Ready):
            self.ansible_version = message.ansible_version
            self.modules_in_worker, self.why_not_in_worker = message.modules_in_worker, message.why_not_in_worker
            self.why_not_lean = message.why_not_lean
            self.heap = message.heap
            log.info(
                "warm Ansible process ready",
                extra={"pid": message.pid, "ansible": message.ansible_version, "seconds": round(message.seconds, 2)},
            )
            self.ready.set()
        elif isinstance(message, protocol.Fatal):
            self._fail(message.error or "the warm Ansible process failed to start")
        elif isinstance(message, protocol.Started | protocol.Exited):
            with self._lock:
                pending = self._pending.get(message.id)
                if pending is not None and isinstance(message, protocol.Exited):
                    del self._pending[pending.run_id]
            if pending is None:
                return
            if isinstance(message, protocol.Started):
                pending.pid = message.pid
            else:
                pending.rc, pending.timed_out = message.rc, message.timed_out
                pending.done.set()

    def _fail(self, error: str) -> None:
        if not self.error:
            self.error = error
        self.ready.set()  # wakes anyone waiting for the warm-up: they read the error

    def _died(self, reason: str) -> None:
        """The zygote is gone: stop the runs it had going and fail them."""
        code = None
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.proc.wait(5)
        detail = f" (exit code {code})" if code is not None else ""
        tail = _tail(self.home / "zygote.log")
        self._fail(f"{reason}{detail}" + (f": {tail}" if tail and not self._closing else ""))
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        # They outlive the zygote otherwise: its runs' trees, and what they started outside them (their mark).
        stops = [(terminate(run.pid, run.mark), run.mark) for run in pending]
        if any(run.pid for run in pending):
            time.sleep(KILL_GRACE)
        for groups, mark in stops:
            kill(groups, mark)
        self._remove_local_tmp()
        for run in pending:
            run.error = self.error
            run.done.set()


def _tail(path: Path, size: int = 2000) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - size))
            lines = handle.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in lines[-5:] if line.strip())
