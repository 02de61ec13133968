"""HTTP endpoints for the kubelet and Prometheus: /healthz, /readyz and /metrics.

Started by ``cli`` before anything else, fed by ``reactor.orchestration`` through the ``Probes`` it
holds; /metrics also carries the metrics roles send (``usermetrics``). Unlike upstream's plain pings, the
probes check something: /readyz is ready only when every watch has synced, the executor can run and this
replica leads (or could take over); /healthz fails when the workers or the watch loop stop making progress.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from hybrid_operator.metrics import REGISTRY
from hybrid_operator.usermetrics import USER_METRICS

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


class Probes:
    """Named checks; each returns (ok, detail)."""

    def __init__(self) -> None:
        self.live: dict[str, Check] = {}
        self.ready: dict[str, Check] = {}

    @staticmethod
    def evaluate(checks: dict[str, Check]) -> tuple[bool, str]:
        lines, healthy = [], True
        for name, check in sorted(checks.items()):
            try:
                ok, detail = check()
            except Exception as exc:  # a broken check is a failed check
                ok, detail = False, f"check raised {exc!r}"
            healthy &= ok
            lines.append(f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}: {detail}")
        lines.append("healthz check passed" if healthy else "healthz check failed")
        return healthy, "\n".join(lines) + "\n"


def parse_address(address: str) -> tuple[str, int] | None:
    """':8443' -> ('0.0.0.0', 8443); '0' disables; 'host:port' as given."""
    if address in ("0", ""):
        return None
    host, _, port = address.rpartition(":")
    return (host or "0.0.0.0", int(port))


def serve(address: str, probes: Probes | None, metrics: bool) -> ThreadingHTTPServer | None:
    bind = parse_address(address)
    if bind is None:
        return None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if metrics and path == "/metrics":
                self._send(200, generate_latest(REGISTRY) + USER_METRICS.render(), CONTENT_TYPE_LATEST)
            elif probes is not None and path in ("/healthz", "/livez", "/readyz"):
                checks = probes.ready if path == "/readyz" else probes.live
                ok, text = Probes.evaluate(checks)
                if path == "/readyz" and not checks:  # nothing registered yet: still starting
                    ok, text = False, "starting\n"
                self._send(200 if ok else 503, text.encode(), "text/plain; charset=utf-8")
            else:
                self._send(404, b"not found\n", "text/plain")

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # probes every few seconds would drown the log

    server = ThreadingHTTPServer(bind, Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=f"http-{bind[1]}", daemon=True).start()
    host, port = server.server_address[:2]
    log.info("serving %s on %s:%s", "metrics" if metrics else "health probes", host, port)
    return server
