"""HTTP endpoints for the kubelet and Prometheus: /healthz, /readyz and /metrics.

Built by ``cli`` and started before anything else (the lifecycle's SERVERS group), fed through the ``Probes``
it holds: ``/readyz`` asks the lifecycle's checks (each part that runs says whether it is ready), ``/healthz``
the workers; /metrics also carries the metrics roles send (``usermetrics``). Unlike upstream's plain pings,
the probes check something: /readyz is ready only when every watch has synced, the executor can run and this
replica leads (or could take over); /healthz fails when the workers or the watch loop stop making progress.
Every scrape of /metrics runs the same checks and publishes each as ``hybrid_operator_ready{check}`` and
``hybrid_operator_live{check}`` (0/1), so an alert can say which check fails without anyone probing.

With ``--metrics-secure`` the metrics server speaks HTTPS (``tlsserving``) and with
``--metrics-require-rbac`` every request on it is first decided by a ``metricsauth.Gate``: 401, 403, 429
(with Retry-After: too many reviews from the caller's address) or served. Both servers are bounded
(``httpbounds.BoundedServer``): the TLS handshake happens in the connection's own thread, and it and the
request head must be done within 5 s together; at most 64 connections wait for their head (16 per client
address, the oldest closed to make room) and 32 are served at once (8 per client address), so clients
that trickle or stall hold a bounded number of threads and never the probes.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from hybrid_operator.httpbounds import BoundedHandler, BoundedServer, Bounds
from hybrid_operator.metrics import LIVE, READY, REGISTRY
from hybrid_operator.serving.metricsauth import Gate
from hybrid_operator.serving.tlsserving import ServerTLS
from hybrid_operator.serving.usermetrics import USER_METRICS

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]
REQUEST_TIMEOUT = 10.0  # seconds each read or write may take once the head is in
BOUNDS = Bounds(max_connections=32, max_served_per_key=8, max_pending=64, max_pending_per_address=16)


class Probes:
    """Named checks; each returns (ok, detail)."""

    def __init__(self) -> None:
        self.live: dict[str, Check] = {}
        self.ready: dict[str, Check] = {}

    @staticmethod
    def evaluate(checks: dict[str, Check]) -> tuple[bool, str]:
        lines, healthy = [], True
        for name, check in sorted(checks.items()):
            ok, detail = _check(check)
            healthy &= ok
            lines.append(f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}: {detail}")
        lines.append("healthz check passed" if healthy else "healthz check failed")
        return healthy, "\n".join(lines) + "\n"

    def publish(self) -> None:
        """Each check's verdict as a 0/1 gauge (``hybrid_operator_ready``, ``hybrid_operator_live``)."""
        for checks, gauge in ((self.ready, READY), (self.live, LIVE)):
            for name, check in list(checks.items()):
                gauge.labels(name).set(1 if _check(check)[0] else 0)


def _check(check: Check) -> tuple[bool, str]:
    try:
        return check()
    except Exception as exc:  # a broken check is a failed check
        return False, f"check raised {exc!r}"


def parse_address(address: str) -> tuple[str, int] | None:
    """':8443' -> ('0.0.0.0', 8443); '0' disables; 'host:port' as given."""
    if address in ("0", ""):
        return None
    host, _, port = address.rpartition(":")
    return (host or "0.0.0.0", int(port))


class _Server(BoundedServer):
    """One of our HTTP servers: what it serves, and how (TLS, a gate) when it is the secured metrics one."""

    def __init__(
        self,
        bind: tuple[str, int],
        probes: Probes | None,
        metrics: bool,
        tls: ServerTLS | None,
        gate: Gate | None,
        bounds: Bounds,
        scraped: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(bind, _Handler, bounds, "metrics server" if metrics else "health probes")
        self.probes = probes
        self.metrics = metrics
        self.tls = tls
        self.gate = gate
        self.scraped = scraped  # called before each /metrics answer (Probes.publish)

    def get_request(self) -> tuple[socket.socket, object]:
        sock, addr = self.socket.accept()
        if self.tls is None:
            return sock, addr
        # The handshake is left to the handler's thread, under the head's deadline (see module docstring).
        return self.tls.context().wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr


class _Handler(BoundedHandler):
    timeout = REQUEST_TIMEOUT
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        gate, probes = self.server.gate, self.server.probes
        if gate is not None:
            decision = gate.decide(self.headers.get("Authorization"), "GET", path, str(self.client_address[0]))
            if not decision.allowed:
                self._send(
                    decision.status, f"{decision.reason}\n".encode(), "text/plain; charset=utf-8", decision.retry_after
                )
                return
        if self.server.metrics and path == "/metrics":
            if self.server.scraped is not None:
                self.server.scraped()
            self._send(200, generate_latest(REGISTRY) + USER_METRICS.render(), CONTENT_TYPE_LATEST)
        elif probes is not None and path in ("/healthz", "/livez", "/readyz"):
            checks = probes.ready if path == "/readyz" else probes.live
            ok, text = Probes.evaluate(checks)
            if path == "/readyz" and not checks:  # nothing registered yet: still starting
                ok, text = False, "starting\n"
            self._send(200 if ok else 503, text.encode(), "text/plain; charset=utf-8")
        else:
            self._send(404, b"not found\n", "text/plain")

    def _send(self, code: int, body: bytes, content_type: str, retry_after: int = 0) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if code == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="metrics"')
        if retry_after:
            self.send_header("Retry-After", str(retry_after))
        self.end_headers()
        self.wfile.write(body)


def server(
    address: str,
    probes: Probes | None,
    metrics: bool,
    tls: ServerTLS | None = None,
    gate: Gate | None = None,
    bounds: Bounds = BOUNDS,
    scraped: Callable[[], None] | None = None,
) -> BoundedServer | None:
    """A server bound to ``address`` ('0' or '': none), to ``start`` (the lifecycle's SERVERS do) and ``stop``.

    ``scraped`` is called before each /metrics answer, to bring gauges up to date (``Probes.publish``).
    """
    bind = parse_address(address)
    if bind is None:
        return None
    made = _Server(bind, probes, metrics, tls, gate, bounds, scraped)
    host, port = made.server_address[:2]
    what = "metrics" if metrics else "health probes"
    if tls is not None:
        what += f" over HTTPS with {tls.source}"
    if gate is not None:
        what += ", callers checked with TokenReview and SubjectAccessReview"
    log.info("serving %s on %s:%s", what, host, port)
    return made
