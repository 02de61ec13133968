"""HTTPS for the metrics server: the certificate it presents, reloads, and the gate in front of /metrics.

Real sockets and real TLS on loopback; the gate's two API calls answer from a table (the real API server
is asked in tests/integration/test_metrics_auth.py).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from hybrid_operator.errors import ConfigError
from hybrid_operator.httpbounds import Bounds
from hybrid_operator.kube.reviews import Identity
from hybrid_operator.serving import health
from hybrid_operator.serving.metricsauth import Gate, Limits
from hybrid_operator.serving.tlsserving import ServerTLS, self_signed
from tests.helpers import wait_until
from tests.trickling import Tricklers, client_hello

READER = Identity("reader", "", (), ())


def get(port: int, path: str = "/metrics", token: str | None = None, cafile: Path | None = None) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(cafile)) if cafile else ssl._create_unverified_context()
    conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def peer_cert(port: int) -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        ssl._create_unverified_context().wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        return der


@pytest.fixture
def serve() -> Iterator[Callable[..., int]]:
    servers = []

    def start(tls: ServerTLS, gate: Gate | None = None, bounds: Bounds = health.BOUNDS) -> int:
        server = health.server("127.0.0.1:0", None, metrics=True, tls=tls, gate=gate, bounds=bounds)
        assert server is not None
        server.start()
        servers.append(server)
        return int(server.server_address[1])

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def write_pair(directory: Path, hosts: list[str]) -> bytes:
    cert, key = self_signed(hosts)
    (directory / "tls.crt").write_bytes(cert)
    (directory / "tls.key").write_bytes(key)
    return cert


def test_a_self_signed_certificate_names_the_hosts() -> None:
    cert = x509.load_pem_x509_certificate(self_signed(["localhost", "127.0.0.1", "metrics.example"])[0])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost", "metrics.example"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_metrics_over_https_with_a_certificate_made_at_start(serve: Callable[..., int]) -> None:
    port = serve(ServerTLS())
    status, body = get(port)
    assert status == 200 and "ansible_operator_build_info" in body
    # Plain HTTP on the TLS port gets nothing back.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        conn.request("GET", "/metrics")
        conn.getresponse().read()


def test_a_certificate_from_files_verifies_and_is_reloaded(serve: Callable[..., int], tmp_path: Path) -> None:
    first = write_pair(tmp_path, ["localhost"])
    tls = ServerTLS.from_dir(tmp_path, "tls.crt", "tls.key")
    tls._recheck = 0.1
    port = serve(tls)
    assert get(port, cafile=tmp_path / "tls.crt")[0] == 200
    assert peer_cert(port) == x509.load_pem_x509_certificate(first).public_bytes(Encoding.DER)

    second = write_pair(tmp_path, ["localhost"])  # as cert-manager renews the Secret
    time.sleep(0.2)
    assert peer_cert(port) == x509.load_pem_x509_certificate(second).public_bytes(Encoding.DER)

    (tmp_path / "tls.crt").write_text("half written")
    time.sleep(0.2)
    assert peer_cert(port) == x509.load_pem_x509_certificate(second).public_bytes(Encoding.DER)


def test_missing_certificate_files_stop_the_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot load the metrics certificate"):
        ServerTLS.from_dir(tmp_path, "tls.crt", "tls.key")


def reader_gate() -> Gate:
    return Gate(
        lambda t: READER if t == "good" else Identity("other", "", (), ()) if t == "other" else None,
        lambda who, verb, path: who == READER and (verb, path) == ("get", "/metrics"),
    )


def test_the_gate_answers_before_anything_is_served(serve: Callable[..., int]) -> None:
    gate = reader_gate()
    port = serve(ServerTLS(), gate)
    assert get(port)[0] == 401
    assert get(port, token="forged")[0] == 401
    status, body = get(port, token="other")
    assert status == 403 and '"other"' in body
    status, body = get(port, token="good")
    assert status == 200 and "ansible_operator_build_info" in body
    assert get(port, "/nothing-here", token="good")[0] == 403  # not even a 404 without the right


def test_a_stalled_client_does_not_hold_up_others(serve: Callable[..., int]) -> None:
    port = serve(ServerTLS())
    with socket.create_connection(("127.0.0.1", port)):  # connects, never says hello
        started = time.monotonic()
        assert get(port)[0] == 200
        assert time.monotonic() - started < 5


def test_a_scrape_is_served_while_twice_the_pending_cap_trickles_its_handshake(serve: Callable[..., int]) -> None:
    port, hello = serve(ServerTLS(), reader_gate()), client_hello()
    spread = [f"127.0.0.{n}" for n in range(2, 10)]  # 8 addresses x 16: twice as many as may wait
    trickles = [Tricklers(port, 16, head=hello, source=source, limit=20) for source in spread]
    for tricklers in trickles:
        tricklers.__enter__()
    try:
        time.sleep(1.5)
        for _ in range(5):
            started = time.monotonic()
            assert get(port, token="good")[0] == 200
            assert time.monotonic() - started < 3
    finally:
        for tricklers in trickles:
            tricklers.__exit__(None, None, None)


def test_a_trickling_handshake_is_closed_at_the_deadline(serve: Callable[..., int]) -> None:
    bounds = Bounds(max_connections=4, max_served_per_key=4, head_deadline=1.0)
    port = serve(ServerTLS(), None, bounds)
    with Tricklers(port, 3, head=client_hello(), every=0.2, limit=10) as tricklers:  # no read waits 10 s
        wait_until(lambda: len(tricklers.lifetimes) >= 3, 5)
    assert all(0.9 <= lasted < 2.5 for lasted in tricklers.lifetimes[:3]), tricklers.lifetimes


def test_a_flood_of_tokens_over_https_gets_429_and_few_reviews(serve: Callable[..., int]) -> None:
    """Distinct bogus tokens from one address: the burst is reviewed, the rest answered 429, Retry-After."""
    asked: list[str] = []
    gate = Gate(
        lambda t: asked.append(t) or (READER if t == "good" else None),
        lambda who, verb, path: who == READER,
        limits=Limits(client_rate=0.01, client_burst=5, total_rate=1, total_burst=50),
    )
    port = serve(ServerTLS(), gate)
    statuses = [get(port, token=f"bogus-{i}")[0] for i in range(40)]
    assert statuses == [401] * 5 + [429] * 35
    assert len(asked) == 5
    conn = http.client.HTTPSConnection("localhost", port, context=ssl._create_unverified_context(), timeout=10)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": "Bearer good"})
        resp = conn.getresponse()
        assert resp.status == 429 and int(resp.getheader("Retry-After") or 0) >= 1
    finally:
        conn.close()
