"""The HTTP receiver roles send custom metrics to: ``POST /metrics`` on localhost:5050, as upstream.

Built by ``cli`` next to the probe and metrics servers, and started and stopped with them (the
lifecycle's SERVERS, before any run). Each request is one ``usermetrics.UserMetric``: read with bounds
(the head within 5 s, ``Content-Length`` required and at most 64 KiB, the body within 10 s), parsed by
``usermetrics.parse`` and applied to ``usermetrics.USER_METRICS``, which ``health`` serves on /metrics.
Any local process can connect, so the server is a ``httpbounds.BoundedServer``: until its body is in, a
request is pending, and at most 16 are (8 per client address; the oldest is closed to make room), so
clients that trickle never keep a role's metric out; 16 are served at once. Answers as operator-sdk's
apiserver does: 200 with an empty body, 400 with the reason, 405 for another method on /metrics; and,
beyond upstream, 411/413 for a body without a length or too large. A request never gets a traceback.

The operator tells its runs where the receiver listens through ``URL_ENV`` (the actual port when the flag
asked for port 0), so our ``osdk_metric`` finds it wherever it is; the Galaxy module always uses
``http://localhost:5050/metrics`` unless the task gives ``address``.

Only the operator's runs are heard: any local process can connect, and one (another user's) once
registered a metric under another type, after which every run's ``osdk_metric`` failed. The receiver
makes a secret at start, the operator hands it to its runs through ``TOKEN_ENV`` (a process's environment
is readable by its own user only), and a request without ``Authorization: Bearer <secret>`` gets 401
before its body is read. Our ``osdk_metric`` sends it to this receiver's URL and nowhere else; the Galaxy
module sends none, so under hybrid-operator a role uses the bundled ``operator_sdk.util`` (it does by default).
"""

from __future__ import annotations

import hmac
import logging
import secrets
import socket
import time
from http.server import ThreadingHTTPServer

from hybrid_operator.errors import ConfigError
from hybrid_operator.httpbounds import BoundedHandler, BoundedServer, Bounds
from hybrid_operator.serving.usermetrics import MAX_BODY_BYTES, USER_METRICS, UserMetricError, UserMetrics, parse

log = logging.getLogger(__name__)

DEFAULT_ADDRESS = "localhost:5050"
URL_ENV = "HYBRID_OPERATOR_USER_METRICS_URL"
TOKEN_ENV = "HYBRID_OPERATOR_USER_METRICS_TOKEN"
PATH = "/metrics"
READ_TIMEOUT = 5.0  # seconds per socket read once the head is in
BODY_DEADLINE = 10.0  # seconds for the whole body, however slowly it trickles in
BOUNDS = Bounds(max_connections=16, max_served_per_key=16, max_pending=16, max_pending_per_address=8)


def parse_address(address: str) -> tuple[str, int] | None:
    """'localhost:5050' -> ('localhost', 5050); ':5050' -> ('localhost', 5050); '0' or '' disables."""
    if address in ("0", ""):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--user-metrics-bind-address: expected host:port or 0, got {address!r}")
    # An empty host stays on loopback (unlike the metrics server): roles run beside the operator.
    return (host.strip("[]") or "localhost", int(port))


class Receiver(BoundedServer):
    """The bounded server, with the store the metrics go to."""

    def __init__(self, bind: tuple[str, int], store: UserMetrics, bounds: Bounds) -> None:
        self.store = store
        self.token = secrets.token_urlsafe(32)  # the operator's runs get it through TOKEN_ENV
        super().__init__(bind, _Handler, bounds, "role metrics receiver")


class _Handler(BoundedHandler):
    server: Receiver
    timeout = READ_TIMEOUT
    admit_after_head = False  # a request is pending until its body is in: see do_POST
    _body_read = False

    def do_POST(self) -> None:
        if not self._on_path():
            return
        given = (self.headers.get("Authorization") or "").encode("utf-8", "replace")
        if not hmac.compare_digest(given, f"Bearer {self.server.token}".encode()):
            log.debug("role metric refused from %s: not one of the operator's runs", self.client_address[0])
            self._send(401, "role metrics are accepted from the operator's own runs only\n")
            return
        try:
            body = self._body()
            if not self.admit():
                return
            metric = parse(body)
            self.server.store.apply(metric)
        except UserMetricError as exc:
            log.debug("role metric refused: %s", exc)
            self._send(exc.status, f"{exc}\n")
            return
        except Exception:  # a bug of ours: say so without the details, log them
            log.exception("role metrics receiver failed on a request")
            self._send(500, "internal error\n")
            return
        self._send(200, "")

    def _refuse_method(self) -> None:
        if self._on_path():
            self._send(405, "Method not allowed\n", allow=True)

    do_GET = do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def _on_path(self) -> bool:
        if self.path.split("?", 1)[0] == PATH:
            return True
        self._send(404, "404 page not found\n")
        return False

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding"):
            raise UserMetricError("Transfer-Encoding is not supported: send Content-Length", 411)
        raw = self.headers.get("Content-Length")
        if raw is None:
            raise UserMetricError("Content-Length required", 411)
        raw = raw.strip()
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
            raise UserMetricError("Content-Length: not a number of bytes")
        length = int(raw)
        if length > MAX_BODY_BYTES:
            raise UserMetricError(f"body is {length} bytes; at most {MAX_BODY_BYTES} are accepted", 413)
        chunks, remaining, deadline = [], length, time.monotonic() + BODY_DEADLINE
        while remaining > 0:
            if time.monotonic() > deadline:
                raise UserMetricError("body arrived too slowly")
            try:
                chunk = self.rfile.read1(remaining)
            except TimeoutError:
                raise UserMetricError("body arrived too slowly") from None
            if not chunk:
                raise UserMetricError(f"body ended after {length - remaining} of {length} bytes")
            chunks.append(chunk)
            remaining -= len(chunk)
        self._body_read = True
        return b"".join(chunks)

    def _send(self, code: int, text: str, allow: bool = False) -> None:
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if allow:
            self.send_header("Allow", "POST")
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True

    def finish(self) -> None:
        """After a refusal that left the body unread, drain a little of it before the socket closes.

        Closing a socket with unread data sends a reset, which can destroy the answer before the client
        reads it; reading on (bounded in bytes and time) lets the client see why it was refused.
        """
        super().finish()
        headers = getattr(self, "headers", None)
        if (
            self._body_read
            or headers is None
            or not (headers.get("Content-Length") or headers.get("Transfer-Encoding"))
        ):
            return
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(1.0)
            drained, deadline = 0, time.monotonic() + 2.0
            while drained < MAX_BODY_BYTES and time.monotonic() < deadline:
                chunk = self.connection.recv(16384)
                if not chunk:
                    break
                drained += len(chunk)
        except OSError:
            pass  # the client went away: nothing left to protect


def server(address: str, store: UserMetrics = USER_METRICS, bounds: Bounds = BOUNDS) -> Receiver | None:
    """A receiver bound to ``address`` (None when disabled with '0'), to ``start`` and ``stop``; ``OSError``
    when it cannot be bound."""
    bind = parse_address(address)
    if bind is None:
        return None
    made = Receiver(bind, store, bounds)
    log.info("receiving role metrics on %s", url(made))
    return made


def url(server: ThreadingHTTPServer) -> str:
    """Where roles send to: the bound host and port (an IPv6 host in brackets)."""
    host, port = server.server_address[:2]
    host = str(host)
    return f"http://[{host}]:{port}{PATH}" if ":" in host else f"http://{host}:{port}{PATH}"
