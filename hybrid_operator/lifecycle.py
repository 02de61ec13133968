"""Everything that runs has one lifecycle: started in order, asked whether it is ready, stopped in reverse.

Owned by ``cli`` for ``run`` (``reactor.orchestration`` adds the operator's parts) and by
``reactor.oneshot`` for ``reconcile FILE``. Each part that runs is a ``Runnable``: the HTTP servers
(``httpbounds.BoundedServer``: probes, metrics, the role-metrics receiver, the runs' proxy), the executor,
the sharding ring, the leader elector, the workers, the watched kinds and the dependent watches.
``start()`` returns at once (what it runs goes on in threads it owns, usually a ``Loop``);
``stop(deadline)`` stops it, started or not, and waits for it until ``deadline`` (``time.monotonic``) at
most; ``ready()`` says whether it does its job.

One ``Lifecycle`` starts them in groups, as controller-runtime's manager does
(``pkg/manager/runnable_group.go``): the SERVERS first (the kubelet probes from the start), then what every
replica keeps going (OTHERS: the executor, the ring), then the ELECTION (the leader elector), and once this
replica leads (``lead``), what only the leader runs (LEADING: the workers, then the watches). It stops them
in the reverse order, within one deadline (``--graceful-shutdown-timeout``): the watches stop delivering,
the workers finish their runs (until ``CLEANUP`` seconds before the deadline), the Lease is given up, the
ring and the executor stop, the servers go last. A runnable that fails to start stops the ones already
started. ``checks`` are their ``ready()``, named, for ``/readyz``.

Signals are only recorded: ``signal.set_wakeup_fd`` has Python's own C-level handler write the signal's
number into a pipe (the ``Inbox``, where threads leave their requests too), the Python-level handler does
nothing, and the owner's loop (``run``, on the main thread) reads the pipe. No lock is taken and nothing is
logged in a handler, so a second signal arriving while the first is handled (a kubelet's SIGTERM and a
shell's, Ctrl-C and a trap forwarding SIGTERM) has nothing to wait for. Once stopping, further signals are
left in the pipe: the stop is already under way and bounded by its deadline.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any, Protocol

from hybrid_operator.errors import OperatorError

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_LEAD, _STOP = 0xF0, 0xF1  # what threads write into the pipe; signal numbers are below 65
# Seconds of the grace period (a quarter at most) kept for what stops after the leader's group: the warm
# executor kills the runs the drain abandoned (2 s from SIGTERM to SIGKILL), the Lease is given up, the
# servers close. The kubelet's grace period is 30 s by default, as ours: all of it must fit in.
CLEANUP = 2.5


class Runnable(Protocol):
    def start(self) -> None:
        """Start and return at once; raise (``OperatorError``, ``OSError``) if it cannot."""

    def stop(self, deadline: float) -> bool:
        """Stop (started or not, once or again); wait until ``deadline`` at most. True if it stopped in time."""

    def ready(self) -> tuple[bool, str]:
        """Whether it does its job now, and a line saying so."""


class Group(enum.IntEnum):
    """The order things start in; they stop in the reverse one."""

    SERVERS = 0  # the HTTP we serve, and the runs' proxy
    OTHERS = 1  # what every replica keeps going, leading or not: the executor, the ring
    ELECTION = 2  # the leader elector: the LEADING group waits for ``lead``
    LEADING = 3  # what only the leader runs: the workers, then the watches


@dataclass
class _Entry:
    group: Group
    name: str
    runnable: Runnable
    state: str = "added"  # added -> started -> stopped


class Loop:
    """A function running in a thread of its own until stopped: ``target(stopping)`` returns soon after
    ``stopping`` is set. A ``Runnable``; what owns it calls ``start`` and ``stop``. ``stopping``: an event
    of the owner's, when setting it once is to stop many loops (its informers)."""

    def __init__(
        self, name: str, target: Callable[[threading.Event], None], stopping: threading.Event | None = None
    ) -> None:
        self.name = name
        self.target = target
        self.stopping = threading.Event() if stopping is None else stopping
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one thread, whoever starts it first

    def start(self) -> None:
        with self._lock:
            if self._thread is not None or self.stopping.is_set():
                return
            self._thread = threading.Thread(target=self.target, args=(self.stopping,), name=self.name, daemon=True)
            self._thread.start()

    def stop(self, deadline: float) -> bool:
        self.stopping.set()
        return self.join(deadline)

    def join(self, deadline: float) -> bool:
        """Wait for the function to return, until ``deadline`` at most; True if it did (or never started)."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(max(0.0, deadline - time.monotonic()))
        return not thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def ready(self) -> tuple[bool, str]:
        if self.alive:
            return True, "running"
        return False, "stopped" if self._thread is not None else "not started"


class Closing:
    """Something that only needs closing when everything stops (a private scratch dir), as a ``Runnable``."""

    def __init__(self, close: Callable[[], None]) -> None:
        self._close = close

    def start(self) -> None:
        pass

    def stop(self, deadline: float) -> bool:
        self._close()
        return True

    def ready(self) -> tuple[bool, str]:
        return True, "ok"


class Inbox:
    """What signals and threads tell the owner's loop: one byte each, through a pipe. A signal's byte is
    written by Python's own C-level handler (``signal.set_wakeup_fd``): the handlers here do nothing."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._closed = False
        self._previous: dict[int, Any] = {}
        self._previous_wakeup: int | None = None

    def send(self, message: int) -> None:
        """From any thread."""
        if self._closed:
            return  # nobody reads any more, and the descriptor may be another file's by now
        with contextlib.suppress(OSError):  # full: it holds unread messages already, the loop wakes anyway
            os.write(self._write, bytes([message]))

    def take(self, timeout: float | None) -> bytes:
        """What the pipe holds, waiting up to ``timeout`` for something (None: as long as it takes)."""
        readable, _, _ = select.select([self._read], [], [], timeout)
        if not readable:
            return b""
        try:
            return os.read(self._read, 512)
        except BlockingIOError:
            return b""

    def record_signals(self) -> None:
        """From now on SIGTERM and SIGINT only land here (the main thread only)."""
        self._previous_wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, _recorded)

    def close(self) -> None:
        """Give the signals back to what handled them before, and close the pipe."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        if self._previous_wakeup is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
        self._closed = True
        os.close(self._read)
        os.close(self._write)


class Lifecycle:
    """The one owner of what runs: ``add`` in order, then ``run`` (the main thread) or ``start``/``stop``.

    As a context manager it stops everything added when the block ends, however it ends, and then
    closes; ``record_signals`` makes SIGTERM and SIGINT requests to stop.
    """

    def __init__(self, grace: float, checks: dict[str, Check] | None = None) -> None:
        self.grace = grace  # seconds the whole stop may take: --graceful-shutdown-timeout
        self.checks: dict[str, Check] = {} if checks is None else checks
        self._entries: list[_Entry] = []
        self._lock = threading.Lock()  # the entries and whether stopping began
        self._inbox = Inbox()
        self._code = 0
        self._stop_asked = False
        self._leads = False
        self._stopping = False

    # -- composition -----------------------------------------------------------------------------------

    def add(self, group: Group, name: str, runnable: Runnable, *, check: str = "") -> None:
        """Own ``runnable``: started with its group, stopped in reverse. ``check``: its name in /readyz."""
        entry = _Entry(group, name, runnable)
        with self._lock:
            self._entries.append(entry)
        if check:
            self.checks[check] = lambda: self._ready(entry)

    def _ready(self, entry: _Entry) -> tuple[bool, str]:
        if entry.state == "started":
            return entry.runnable.ready()
        if entry.state == "stopped" or self._stopping:
            return False, "stopping"
        if entry.group is Group.LEADING and self._gated() and not self._leads:
            return True, "standing by: starts when this replica leads"
        return False, "starting"

    # -- what threads may call -------------------------------------------------------------------------

    def lead(self) -> None:
        """This replica leads now: start the LEADING group (called by the elector, from its thread)."""
        self._inbox.send(_LEAD)

    def request_stop(self, code: int = 0) -> None:
        """Stop everything and have ``run`` return ``code`` (the highest asked); from any thread."""
        self._code = max(self._code, code)
        self._inbox.send(_STOP)

    # -- the owner's loop (main thread) ----------------------------------------------------------------

    def run(self) -> int:
        """Start the groups in order, wait for a signal or ``request_stop``, stop; the exit code (0, 1)."""
        try:
            if self._start_in_turn():
                self._wait(lambda: False)
        finally:
            self.stop()
        return self._code

    def _start_in_turn(self) -> bool:
        """Every group in order, the leader's once this replica leads; False if a stop came first or one failed."""
        for group in Group:
            if group is Group.LEADING and self._gated():
                self._wait(lambda: self._leads)
            if self._stop_asked or not self.start(group):
                return False
        return True

    def start_all(self) -> bool:
        """Start every group in order without waiting to lead (``reconcile FILE``); False if one failed."""
        return all(self.start(group) for group in Group)

    def start(self, group: Group) -> bool:
        """Start ``group``'s runnables in order; False (and exit code 1) when one fails or a stop was asked."""
        with self._lock:
            entries = [entry for entry in self._entries if entry.group is group and entry.state == "added"]
        for entry in entries:
            self._take_messages(0)
            if self._stop_asked:
                return False
            entry.state = "started"
            try:
                entry.runnable.start()
            except (OperatorError, OSError) as exc:
                log.error("could not start %s: %s", entry.name, exc)
                self._code = 1
                return False
            except Exception:
                log.exception("could not start %s", entry.name)
                self._code = 1
                return False
        return True

    def stop(self) -> bool:
        """Stop everything added, in the reverse order, within ``grace``; True if all stopped in time."""
        with self._lock:
            if self._stopping:
                return True
            self._stopping = True
            entries = sorted(self._entries, key=lambda entry: entry.group)  # the start order (stable)
        deadline = time.monotonic() + self.grace
        drained = deadline - min(CLEANUP, self.grace / 4)  # for the leader's group: the workers' runs
        clean = True
        for entry in reversed(entries):
            began = time.monotonic()
            try:
                stopped = entry.runnable.stop(drained if entry.group is Group.LEADING else deadline)
            except Exception:
                log.exception("stopping %s failed", entry.name)
                stopped = False
            entry.state = "stopped"
            clean &= stopped
            log.debug("%s %s in %.2fs", entry.name, "stopped" if stopped else "not stopped", time.monotonic() - began)
        log.info("stopped")
        return clean

    def _gated(self) -> bool:
        return any(entry.group is Group.ELECTION for entry in self._entries)

    def _wait(self, until: Callable[[], bool]) -> None:
        """Read messages until ``until()`` or a stop is asked."""
        while not until() and not self._stop_asked:
            self._take_messages(None)

    def _take_messages(self, timeout: float | None) -> None:
        """Act on what the inbox holds (waiting up to ``timeout`` for something; None: as long as it takes)."""
        for message in self._inbox.take(timeout):
            if message == _LEAD:
                self._leads = True
            elif message == _STOP:
                self._stop_asked = True
            elif message in STOP_SIGNALS and not self._stop_asked:
                self._stop_asked = True
                log.info("received %s: finishing running reconciles", signal.Signals(message).name)

    # -- signals ---------------------------------------------------------------------------------------

    def record_signals(self) -> None:
        """From now on SIGTERM and SIGINT only ask to stop: their bytes land in the inbox ``run`` reads."""
        self._inbox.record_signals()

    def close(self) -> None:
        """Stop everything (if not yet), give the signals back to what handled them before."""
        try:
            self.stop()
        finally:
            self._inbox.close()

    def __enter__(self) -> Lifecycle:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _recorded(_signum: int, _frame: FrameType | None) -> None:
    """Nothing to do: Python's C-level handler has already written the signal's number into the pipe."""
