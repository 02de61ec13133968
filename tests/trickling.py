"""Slow clients for the servers' tests, written as an attacker would: real sockets on loopback.

``Tricklers`` holds ``count`` connections to a port and sends each one more byte of a request head that
never ends, every ``every`` seconds, from one thread. A connection the server closes is opened again at
the next round, as an attacker keeping up the pressure would; how long each lasted is recorded, so a test
can read the server's deadline back. The thread stops by itself after ``limit`` seconds at the latest.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from types import TracebackType

NEVER_ENDING_HEAD = b"GET /" + b"a" * 100_000  # no line end: the head is never complete


def client_hello(server_hostname: str = "localhost") -> bytes:
    """The first bytes a TLS client sends (its ClientHello), to trickle into a TLS server's handshake."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl._create_unverified_context().wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


class Tricklers:
    def __init__(
        self,
        port: int,
        count: int,
        head: bytes = NEVER_ENDING_HEAD,
        every: float = 1.0,
        limit: float = 60.0,
        source: str = "127.0.0.1",
    ) -> None:
        self.port, self.count, self.head, self.every, self.limit, self.source = port, count, head, every, limit, source
        self.lifetimes: list[float] = []  # seconds each connection lasted before the server closed it
        self.opened = 0
        self._socks: dict[socket.socket, tuple[float, int]] = {}  # -> (opened at, bytes sent)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tricklers", daemon=True)

    def __enter__(self) -> Tricklers:
        self._top_up()
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for sock in list(self._socks):
            sock.close()

    @property
    def open(self) -> int:
        return len(self._socks)

    def _top_up(self) -> None:
        while len(self._socks) < self.count and not self._stop.is_set():
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=2, source_address=(self.source, 0))
            except OSError:
                return  # the listen queue is full this round: try again at the next
            sock.setblocking(False)
            self._socks[sock] = (time.monotonic(), 0)
            self.opened += 1

    def _run(self) -> None:
        ends = time.monotonic() + self.limit
        while not self._stop.wait(self.every) and time.monotonic() < ends:
            self._reap()
            for sock, (since, sent) in list(self._socks.items()):
                try:
                    sock.send(self.head[sent : sent + 1])
                    self._socks[sock] = (since, sent + 1)
                except OSError:
                    self._close(sock)
            self._top_up()

    def _reap(self) -> None:
        """Forget connections the server closed (or answered: an answer ends a request head as well)."""
        if not self._socks:
            return
        readable, _, _ = select.select(list(self._socks), [], [], 0)
        for sock in readable:
            self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        since, _ = self._socks.pop(sock)
        self.lifetimes.append(time.monotonic() - since)
        sock.close()
