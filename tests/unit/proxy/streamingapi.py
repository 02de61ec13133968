"""A fake API server for the proxy's stream tests, on raw sockets so it can do what http.server cannot:
switch protocols and echo, stream a watch or a log forever, answer slowly.

- ``POST .../selfsubjectaccessreviews``: ``allowed`` (recorded in ``reviews``);
- an upgrade of ``.../exec|attach|portforward``: ``101`` (then ``early``, then an echo of every byte) or,
  with ``refusal`` set, that answer on a connection it keeps open, as a keep-alive server does;
- a watch (``?watch=`` anything the real server takes for true) and ``.../log?follow=true``: a chunked
  answer, one chunk every ``every`` seconds, endless;
- ``.../services/slow:80/proxy/...`` (a pod's server behind the API server): a plain answer trickling a byte every
  ``every`` seconds, endless;
- anything else: a small JSON answer after ``delay`` seconds.

Every request head is kept in ``heads``; ``live`` counts the connections now upgraded or streaming.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs


@dataclass(frozen=True)
class Head:
    method: str
    target: str
    headers: list[tuple[str, str]]

    def get(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


class StreamingApi:
    def __init__(self) -> None:
        self.allowed = True
        self.refusal: tuple[int, bytes, bool] | None = None  # status, body, chunked
        self.early = b""
        self.every = 0.3
        self.delay = 0.0
        self.heads: list[Head] = []
        self.reviews: list[dict[str, object]] = []
        self.live = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def stop(self) -> None:
        self._stopped = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(30)
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                raw, _, buffer = buffer.partition(b"\r\n\r\n")
                lines = raw.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])]
                head = Head(method, target, headers)
                self.heads.append(head)
                length = int((head.get("Content-Length") or ["0"])[0])
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                body, buffer = buffer[:length], buffer[length:]
                if not self._answer(conn, head, body, buffer):
                    return
                buffer = b""

    def _answer(self, conn: socket.socket, head: Head, body: bytes, rest: bytes) -> bool:
        """Answer one request; False when the connection is done with."""
        path = head.target.partition("?")[0]
        if path.endswith("/selfsubjectaccessreviews"):
            self.reviews.append(json.loads(body))
            _send(conn, 201, json.dumps({"status": {"allowed": self.allowed}}).encode())
            return True
        if path.rstrip("/").rsplit("/", 1)[-1] in ("exec", "attach", "portforward") and head.get("Upgrade"):
            if self.refusal is not None:
                status, text, chunked = self.refusal
                _send(conn, status, text, chunked=chunked)
                return True  # kept open, as a keep-alive server does: the proxy must not wait for its end
            self._switch(conn, head, rest)
            return False
        if _streams(head.target):
            self._stream(conn)
            return False
        if "/services/slow:80/proxy/" in path:  # a pod's own server behind the proxy subresource, trickling
            self._trickle(conn)
            return False
        time.sleep(self.delay)
        _send(conn, 200, json.dumps({"kind": "Status", "path": head.target}).encode())
        return True

    def _switch(self, conn: socket.socket, head: Head, rest: bytes) -> None:
        protocol = (head.get("Sec-WebSocket-Protocol") or head.get("X-Stream-Protocol-Version") or ["none"])[0]
        answer = (
            "HTTP/1.1 101 Switching Protocols\r\n"
            f"Upgrade: {head.get('Upgrade')[0]}\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Protocol: {protocol.split(',')[0].strip()}\r\n"
            f"X-Stream-Protocol-Version: {protocol.split(',')[0].strip()}\r\n\r\n"
        )
        conn.sendall(answer.encode() + self.early)
        conn.settimeout(None)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as the API server (Go) does
        with self._counted():
            data = rest
            while True:
                if data:
                    conn.sendall(data)
                data = conn.recv(65536)
                if not data:
                    return

    def _stream(self, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        with self._counted():
            number = 0
            while True:
                number += 1
                line = json.dumps({"type": "ADDED", "number": number}).encode() + b"\n"
                conn.sendall(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                conn.settimeout(self.every)  # wait for the next event, or for the proxy to hang up
                try:
                    if conn.recv(1) == b"":
                        return
                except TimeoutError:
                    pass

    def _trickle(self, conn: socket.socket) -> None:
        """A plain answer of a million bytes, one every ``every`` seconds: never silent, never done."""
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000000\r\n\r\n")
        with self._counted():
            while True:
                conn.sendall(b"x")
                conn.settimeout(self.every)
                try:
                    if conn.recv(1) == b"":
                        return
                except TimeoutError:
                    pass

    @contextlib.contextmanager
    def _counted(self) -> Iterator[None]:
        with self._lock:
            self.live += 1
        try:
            yield None
        finally:
            with self._lock:
                self.live -= 1


def _streams(target: str) -> bool:
    """Whether the real API server streams its answer: ``watch`` (or a log's ``follow``) by its first value,
    true unless absent, ``0`` or ``false`` in any case (apimachinery's ``Convert_Slice_string_To_bool``)."""
    path, _, query = target.partition("?")
    params = parse_qs(query, keep_blank_values=True)
    for name in ("watch", "follow"):
        values = params.get(name)
        if values and values[0] != "0" and values[0].lower() != "false":
            return name == "watch" or path.endswith("/log")
    return "/watch/" in path


def _send(conn: socket.socket, status: int, body: bytes, *, chunked: bool = False) -> None:
    head = f"HTTP/1.1 {status} Whatever\r\nContent-Type: application/json\r\n"
    if chunked:
        conn.sendall(f"{head}Transfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
    else:
        conn.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
