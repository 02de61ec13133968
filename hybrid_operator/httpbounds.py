"""What every HTTP server of the operator bounds, so a slow or hostile client never holds one.

Shared by the servers we run on ``http.server``: the runs' API proxy (``proxy.server``), the probe and metrics
servers (``health``, with ``tlsserving`` and ``metricsauth`` in front of /metrics) and the role-metrics
receiver (``receiving``). They build a ``BoundedServer`` with their ``Bounds`` and a handler derived from
``BoundedHandler``. A connection goes through two stages:

- **pending**: accepted, its request head (the TLS handshake, the request line and the headers) not yet
  in. The whole head must arrive within ``head_deadline`` seconds however slowly it trickles: each read
  waits at most what is left, not a fresh timeout per read. At most ``max_pending`` connections are
  pending at once and ``max_pending_per_address`` from one client address. A new connection past either
  cap does not wait or get turned away: the oldest pending connection of the address with the most
  pending ones is closed instead. A real client's head comes in its first packet, so it is never the
  oldest for long; a client that trickles can only push out its own connections, or those of an address
  as busy as it.
- **served**: the handler admitted it (``admit``), by default once the head is read; the proxy admits only after
  it has checked the run's token, the receiver once the body is in. At most ``max_connections`` are
  served at once and ``max_served_per_key`` with one key (the client address; on the proxy, the run);
  past that the answer is 503.

A client that goes away (reset, broken pipe, a timeout, a failed handshake) costs one debug line, never a
traceback: that is the client's business, and 308 of them in one probe drowned the operator's log.

A handler that switches protocols (the proxy's exec relay, ``proxy.streaming``) takes the connection over
with ``detach``: from then on the server only counts it as served, and the handler bounds its life itself.

A ``BoundedServer`` is a ``lifecycle.Runnable``: bound when built, serving from ``start`` in a thread of
its own, closed by ``stop``.

Why not aiohttp: these bounds are all http.server lacked for our four small servers, they are ours now and
tested; the proxy's long-lived streams (exec, watches) need one thread each, which its slots already bound.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import ssl
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, ClassVar

from hybrid_operator.lifecycle import Loop

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Bounds:
    """How much of a server its clients may hold; see the module docstring for what each one means."""

    max_connections: int  # served at once
    max_served_per_key: int  # served at once with one key (client address, or the proxy's run)
    max_pending: int = 64  # connections whose head is not in yet
    max_pending_per_address: int = 16
    head_deadline: float = 5.0  # seconds for the whole head, from the connection's start
    max_head_bytes: int = 96 * 1024  # read while the head is pending (a bearer token is at most 16 KiB)

    def __post_init__(self) -> None:
        counts = (self.max_connections, self.max_served_per_key, self.max_pending, self.max_pending_per_address)
        if min(counts) < 1 or self.head_deadline <= 0 or self.max_head_bytes < 1024:
            raise ValueError(f"unusable HTTP bounds: {self}")


class HeadTooLarge(OSError):
    """More than ``max_head_bytes`` arrived before the head ended: the connection is dropped."""


class _DeadlineReader(io.RawIOBase):
    """The socket as a raw stream whose reads end at ``deadline`` while one is set, whatever their pace.

    A timeout per read lets a client that sends one byte every few seconds keep a connection forever;
    waiting at most what is left of the deadline makes the whole head's time the bound.
    """

    def __init__(self, sock: socket.socket, timeout: float | None, max_head_bytes: int) -> None:
        super().__init__()
        self._sock = sock
        self._timeout = timeout
        self._current = timeout  # what the socket's timeout is now (StreamRequestHandler.setup set it)
        self._max_head_bytes = max_head_bytes
        self.deadline: float | None = None
        self.head_bytes = 0
        self.detached = False  # the connection was handed over (``BoundedHandler.detach``): never read again

    def arm(self, deadline: float) -> None:
        self.deadline, self.head_bytes = deadline, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int | None:
        if self.detached:
            return None  # as a non-blocking stream with nothing to read: only what is buffered comes out
        wait = self._timeout
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request head did not arrive in time")
            wait = left if wait is None else min(wait, left)
        if wait != self._current:
            self._sock.settimeout(wait)
            self._current = wait
        count = self._sock.recv_into(buffer)
        if self.deadline is not None:
            self.head_bytes += count
            if self.head_bytes > self._max_head_bytes:
                raise HeadTooLarge(f"more than {self._max_head_bytes} bytes before the end of the head")
        return count


def _host(client_address: Any) -> str:
    return str(client_address[0]) if isinstance(client_address, tuple) and client_address else str(client_address)


def _cut(sock: socket.socket) -> None:
    """Wake the connection's thread with end-of-file: its blocked read returns at once and it ends.

    ``socket.socket.shutdown`` even for a TLS socket: ``SSLSocket.shutdown`` would also drop the TLS state
    under the feet of the thread still reading it. Only called under the server's lock on a connection it
    still tracks, so the descriptor cannot have been closed and reused meanwhile.
    """
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class BoundedServer(ThreadingHTTPServer):
    """A threading HTTP server that applies ``Bounds``; ``name`` is for log lines."""

    daemon_threads = True
    block_on_close = False  # stopping never waits for a client's thread (they are bounded anyway)
    request_queue_size = 128  # socketserver's 5 drops a burst's connections: a real client's among them

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BoundedHandler],
        bounds: Bounds,
        name: str,
        bind_and_activate: bool = True,
    ) -> None:
        self.bounds = bounds
        self.name = name
        self._lock = threading.Lock()
        self._pending: dict[socket.socket, str] = {}  # -> client address; insertion order: oldest first
        self._served: dict[socket.socket, str] = {}  # -> key
        self._served_keys: Counter[str] = Counter()
        self.cut = 0  # pending connections closed to make room, for tests and the debug log
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler, bind_and_activate)
        self._loop: Loop | None = None

    def start(self) -> None:
        """Serve in a thread of its own until ``stop``."""
        if self._loop is None:
            # A short poll: ``stop`` waits for the loop to notice, and every server of the operator stops in turn.
            self._loop = Loop(f"http-{self.server_address[1]}", lambda _stopping: self.serve_forever(poll_interval=0.1))
            self._loop.start()

    def stop(self, deadline: float | None = None) -> bool:
        """Stop serving (at once: a client's thread is never waited for) and close the listening socket."""
        if self._loop is not None:
            self.shutdown()
        self.server_close()
        return True

    def ready(self) -> tuple[bool, str]:
        if self._loop is None or not self._loop.alive:
            return False, f"{self.name} not serving"
        return True, f"{self.name} serving on port {self.server_address[1]}"

    def counts(self) -> tuple[int, int]:
        """(pending, served) connections now."""
        with self._lock:
            return len(self._pending), len(self._served)

    def process_request(self, request: Any, client_address: Any) -> None:
        host = _host(client_address)
        with self._lock:
            victim = self._victim(host)
            if victim is not None:
                del self._pending[victim]
                _cut(victim)
                self.cut += 1
            self._pending[request] = host
        if victim is not None:
            log.debug("%s: too many connections wait for their request head; closed the oldest", self.name)
        try:
            super().process_request(request, client_address)
        except Exception:  # no thread for it (out of threads): forget it, and let socketserver say why
            self.shutdown_request(request)
            raise

    def _victim(self, host: str) -> socket.socket | None:
        """The pending connection to close so that one more from ``host`` fits, or None when it fits."""
        same = [sock for sock, address in self._pending.items() if address == host]
        if len(same) >= self.bounds.max_pending_per_address:
            return same[0]
        if len(self._pending) < self.bounds.max_pending:
            return None
        busiest = Counter(self._pending.values()).most_common(1)[0][0]
        return next(sock for sock, address in self._pending.items() if address == busiest)

    def admit(self, request: Any, key: str) -> bool:
        """Count a pending connection as served under ``key``; False when the caps are reached or it was cut."""
        with self._lock:
            if request in self._served:
                return True  # a further request on a connection already served
            if request not in self._pending:
                return False  # closed to make room meanwhile
            if len(self._served) >= self.bounds.max_connections:
                return False
            if self._served_keys[key] >= self.bounds.max_served_per_key:
                return False
            del self._pending[request]
            self._served[request] = key
            self._served_keys[key] += 1
            return True

    def shutdown_request(self, request: Any) -> None:
        with self._lock:  # forgotten before it is closed: see _cut
            self._pending.pop(request, None)
            key = self._served.pop(request, None)
            if key is not None:
                self._served_keys[key] -= 1
                if self._served_keys[key] <= 0:
                    del self._served_keys[key]
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, OSError):  # resets, broken pipes, timeouts, TLS failures, HeadTooLarge
            log.debug("%s: client %s went away: %s", self.name, _host(client_address), error or type(error).__name__)
            return
        log.error("%s: a request from %s failed", self.name, _host(client_address), exc_info=True)


class BoundedHandler(BaseHTTPRequestHandler):
    """A request handler under its server's ``Bounds``. ``timeout`` bounds each read and write after the head."""

    server: BoundedServer
    timeout = 10.0
    admit_after_head: ClassVar[bool] = True  # False: the handler calls ``admit`` itself, later
    _reader: _DeadlineReader
    _first: bool

    def setup(self) -> None:
        bounds = self.server.bounds
        deadline = time.monotonic() + bounds.head_deadline
        if isinstance(self.request, ssl.SSLSocket):
            # The handshake is part of the head; CPython bounds a whole handshake by the socket's timeout.
            self.request.settimeout(bounds.head_deadline)
            self.request.do_handshake()
        super().setup()
        self._reader = _DeadlineReader(self.connection, self.timeout, bounds.max_head_bytes)
        self._reader.arm(deadline)
        self._first = True
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        if not self._first:  # a kept-alive connection: the next head gets a deadline of its own
            self._reader.arm(time.monotonic() + self.server.bounds.head_deadline)
        self._first = False
        super().handle_one_request()

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self._reader.deadline = None  # the head is in: from here on, reads are the body's
        if ok and self.admit_after_head:
            return self.admit()
        return ok

    def admit(self, key: str | None = None) -> bool:
        """Take a served slot (``key``: the client address unless given); False after answering 503."""
        if self.server.admit(self.request, key if key is not None else _host(self.client_address)):
            return True
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.send_error(503, "Service Unavailable", "too many requests at once; try again")
        return False

    def detach(self) -> tuple[socket.socket, bytes]:
        """Hand the connection over to a handler that switched protocols: its socket, blocking with no
        timeout, and the bytes the client sent past the head (already read into this handler's buffer).

        Whoever takes it bounds its life (``proxy.streaming`` cuts it at a deadline); the server still
        counts it as served until the handler returns, then closes it.
        """
        self._reader.detached = True
        self.close_connection = True
        rest = bytearray()
        while chunk := self.rfile.read1(65536):
            rest += chunk
        self.connection.settimeout(None)
        return self.connection, bytes(rest)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return  # probes every few seconds, a run's every request: too many for the log

    def log_message(self, format: str, *args: Any) -> None:
        return  # send_error's and timeouts' lines come through log_error, at debug

    def log_error(self, format: str, *args: Any) -> None:
        log.debug("%s: %s: %s", self.server.name, _host(self.client_address), format % args)
