"""Network faults for the reliability tests: a TCP relay between the operator and the API server.

Real sockets, real TLS passing through unchanged; the relay only decides whether bytes move. ``silence``
black-holes every connection open at that moment, as a dropped NAT entry or a half-dead load balancer
does: the sockets stay open, nothing arrives, nothing says they died. New connections work, as they do
after a NAT entry is lost.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class _Pair:
    client: socket.socket
    upstream: socket.socket
    silent: threading.Event = field(default_factory=threading.Event)


class Relay:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def silence(self) -> int:
        """Black-hole every connection open now; returns how many."""
        with self._lock:
            for pair in self._pairs:
                pair.silent.set()
            return len(self._pairs)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for pair in self._pairs:
                for sock in (pair.client, pair.upstream):
                    with contextlib.suppress(OSError):
                        sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs.append(pair)
            threading.Thread(target=self._pump, args=(pair, client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, upstream, client), daemon=True).start()

    def _pump(self, pair: _Pair, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not pair.silent.is_set():
                    target.sendall(data)
        except OSError:
            pass
        if not pair.silent.is_set():  # a silent connection never says it ended
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
