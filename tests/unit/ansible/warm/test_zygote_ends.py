"""How the zygote reports a run's end (``zygote.ZygoteServer``): once the run says it is done, on its own pipe,
before its process is gone; then the reap adds no second report, and a timeout still stops a run that said it
was done but does not exit. Real child processes, the zygote's own methods; no Ansible is run."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import time
from collections.abc import Iterator

import pytest

from hybrid_operator.ansible.warm import protocol, zygote


class _Zygote:
    """A ``ZygoteServer`` on one end of a socket pair, the executor's end read here."""

    def __init__(self) -> None:
        self.ours, theirs = socket.socketpair()
        self.server = zygote.ZygoteServer(theirs)
        self.reader = protocol.LineReader()

    def start_child(self, run_id: int, code: int, says_done: bool, lingers: float, deadline: float | None) -> int:
        """A child in a session of its own that (maybe) says it is done with ``code``, lingers, then exits."""
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.setsid()
            os.close(done_r)
            if says_done:
                os.write(done_w, bytes([code]))
            time.sleep(lingers)
            os._exit(code)
        os.close(done_w)
        self.server._done[done_r] = pid
        self.server.running[pid] = zygote._Running(run_id, pid, deadline)
        return pid

    def serve_once(self, timeout: float) -> None:
        """One turn of the zygote's loop: what it does when its select wakes."""
        readable, _w, _x = select.select(list(self.server._done), [], [], timeout)
        for fd in readable:
            self.server._said_done(fd)
        self.server._reap()
        self.server._kill_overdue()

    def reports(self, wait: float = 0.0) -> list[protocol.Message]:
        self.ours.settimeout(wait or 0.001)
        with contextlib.suppress(TimeoutError, BlockingIOError):
            return list(self.reader.feed(self.ours.recv(1 << 16)))
        return []


@pytest.fixture
def zygote_server() -> Iterator[_Zygote]:
    made = _Zygote()
    yield made
    made.server.stop_all()
    made.ours.close()
    made.server.sock.close()


def _alive(pid: int) -> bool:
    return os.waitpid(pid, os.WNOHANG) == (0, 0)


def test_the_end_is_reported_when_the_run_says_so_and_only_once(zygote_server: _Zygote) -> None:
    pid = zygote_server.start_child(run_id=7, code=2, says_done=True, lingers=1.0, deadline=None)
    zygote_server.serve_once(timeout=5)
    assert zygote_server.reports(wait=1) == [protocol.Exited(7, 2, False)]
    assert _alive(pid)  # reported while its process is still there
    deadline = time.monotonic() + 10
    while zygote_server.server.running and time.monotonic() < deadline:
        zygote_server.serve_once(timeout=0.1)
    assert not zygote_server.server.running and not zygote_server.server._done  # reaped, its pipe closed
    assert zygote_server.reports() == []  # no second report


def test_a_run_that_never_says_it_is_done_is_reported_from_its_exit_status(zygote_server: _Zygote) -> None:
    zygote_server.start_child(run_id=8, code=4, says_done=False, lingers=0.0, deadline=None)
    deadline = time.monotonic() + 10
    while zygote_server.server.running and time.monotonic() < deadline:
        zygote_server.serve_once(timeout=0.1)
    assert zygote_server.reports(wait=1) == [protocol.Exited(8, 4, False)]


def test_a_run_that_said_it_was_done_but_does_not_exit_is_still_stopped_at_its_timeout(
    zygote_server: _Zygote,
) -> None:
    pid = zygote_server.start_child(run_id=9, code=0, says_done=True, lingers=60.0, deadline=time.monotonic() + 0.5)
    zygote_server.serve_once(timeout=5)
    assert zygote_server.reports(wait=1) == [protocol.Exited(9, 0, False)]  # its result stands
    deadline = time.monotonic() + 10
    while zygote_server.server.running and time.monotonic() < deadline:
        zygote_server.serve_once(timeout=0.1)
    assert not zygote_server.server.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # SIGTERM at its timeout, reaped
    assert zygote_server.reports() == []  # the timeout does not report it a second time
