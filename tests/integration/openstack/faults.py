"""Faults of an OpenStack cloud, for the VirtualMachine reliability tests: an HTTP reverse proxy in front of
the compute (Nova) API that can be told to misbehave.

The operator reaches Nova through the proxy because the clouds.yaml it gets names the proxy as
``compute_endpoint_override`` (openstacksdk honours ``<service>_endpoint_override``); keystone, glance and
neutron are reached directly. Everything else is real: the requests the proxy lets through reach the real
Nova and change the real cloud, so a server created through it is a real server the tests can look for
with openstacksdk directly.

Faults, one at a time, until ``clear``:

- ``fail(status)``: answer every request with ``status`` (500, 503) and Nova's error body, before Nova sees
  it; ``fail(status, after_forward=True, methods={"POST"})`` lets Nova act first and loses its answer, as a
  load balancer timing out on a slow create does: the server exists, the client was told it failed.
- ``stall()``: accept requests and never answer them (until ``clear``, then drop them unanswered).
- ``error_servers(prefix, message)``: servers whose name starts with ``prefix`` show status ERROR with that
  fault message in every GET, whatever Nova says (a server stuck in ERROR).

The proxy also notes the ``X-Auth-Token`` values it sees, so a test can check no token leaked anywhere.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

# Headers that describe one hop, not the message: never passed on.
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "host"}
_STALL_LIMIT = 600.0


@dataclass
class _Fault:
    status: int = 0
    after_forward: bool = False
    methods: frozenset[str] = frozenset()
    stall: bool = False
    error_prefix: str = ""
    error_message: str = ""


@dataclass
class _State:
    fault: _Fault = field(default_factory=_Fault)
    cleared: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    faulted: int = 0
    tokens: set[str] = field(default_factory=set)


class ComputeFaultProxy:
    """A reverse proxy for Nova at ``upstream`` (``http://host:port/v2.1``), serving on a loopback port."""

    def __init__(self, upstream: str) -> None:
        parsed = urlparse(upstream)
        self.upstream_host = parsed.hostname or "127.0.0.1"
        self.upstream_port = parsed.port or 80
        self.state = _State()
        self.state.cleared.set()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"proxy": self}))
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}{parsed.path}"
        # Nova writes its own address into links and version documents: rewritten to ours, so a client that
        # follows them stays behind the proxy.
        self.rewrites = (f"{self.upstream_host}:{self.upstream_port}".encode(), f"127.0.0.1:{self.port}".encode())
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def faulted(self) -> int:
        """How many requests met a fault so far."""
        return self.state.faulted

    @property
    def tokens(self) -> set[str]:
        """The X-Auth-Token values clients sent through the proxy."""
        with self.state.lock:
            return set(self.state.tokens)

    def fail(self, status: int, *, after_forward: bool = False, methods: Collection[str] = ()) -> None:
        self._set(_Fault(status=status, after_forward=after_forward, methods=frozenset(m.upper() for m in methods)))

    def stall(self) -> None:
        self._set(_Fault(stall=True))

    def error_servers(self, prefix: str, message: str) -> None:
        self._set(_Fault(error_prefix=prefix, error_message=message))

    def clear(self) -> None:
        self._set(_Fault())

    def close(self) -> None:
        self.clear()
        self._server.shutdown()
        self._server.server_close()

    def _set(self, fault: _Fault) -> None:
        with self.state.lock:
            self.state.fault = fault
            if fault.stall:
                self.state.cleared.clear()
            else:
                self.state.cleared.set()

    def note(self, token: str | None) -> _Fault:
        """The fault now in force, noting the client's token."""
        with self.state.lock:
            if token:
                self.state.tokens.add(token)
            return self.state.fault

    def count(self) -> None:
        with self.state.lock:
            self.state.faulted += 1


class _Handler(BaseHTTPRequestHandler):
    """One request: through to Nova, or not, as the proxy's current fault says."""

    protocol_version = "HTTP/1.1"
    proxy: ComputeFaultProxy  # set by the subclass each proxy makes

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest's output is for the tests."""

    def _serve(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = self.proxy.note(self.headers.get("X-Auth-Token"))
        if fault.stall:
            self.proxy.count()
            self.proxy.state.cleared.wait(_STALL_LIMIT)
            self.close_connection = True  # dropped unanswered, as a dead backend does
            return
        refused = bool(fault.status) and (not fault.methods or self.command in fault.methods)
        if refused and not fault.after_forward:
            self.proxy.count()
            self._answer_fault(fault.status)
            return
        status, headers, answer = self._forward(body)
        if refused:
            self.proxy.count()
            self._answer_fault(fault.status)
            return
        if fault.error_prefix and self.command == "GET":
            answer = _errored(answer, fault.error_prefix, fault.error_message, self.proxy)
        self._answer(status, headers, answer.replace(*self.proxy.rewrites))

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self.proxy.upstream_host, self.proxy.upstream_port, timeout=120)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        old, new = (r.decode() for r in self.proxy.rewrites)
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP and name.lower() != "content-length":
                self.send_header(name, value.replace(old, new))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _answer_fault(self, status: int) -> None:
        phrase = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}.get(status, "")
        body = json.dumps({"computeFault": {"code": status, "message": f"injected fault: {phrase}"}}).encode()
        self._answer(status, [("Content-Type", "application/json")], body)


def _errored(answer: bytes, prefix: str, message: str, proxy: ComputeFaultProxy) -> bytes:
    """Nova's answer with every server named ``prefix...`` in ERROR, carrying ``message`` as its fault."""
    try:
        doc = json.loads(answer)
    except ValueError:
        return answer
    if not isinstance(doc, dict):
        return answer
    servers = doc.get("servers") if isinstance(doc.get("servers"), list) else [doc.get("server")]
    changed = False
    for server in servers:
        if isinstance(server, dict) and str(server.get("name", "")).startswith(prefix):
            server.update({"status": "ERROR", "fault": {"code": 500, "message": message, "created": "now"}})
            server["OS-EXT-STS:vm_state"] = "error"
            changed = True
    if changed:
        proxy.count()
        return json.dumps(doc).encode()
    return answer
