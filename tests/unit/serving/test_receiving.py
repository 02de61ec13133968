"""The role metrics receiver over real sockets: answers, bounds, and how the operator starts it."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from hybrid_operator import cli
from hybrid_operator.errors import ConfigError
from hybrid_operator.httpbounds import BoundedServer
from hybrid_operator.serving import health, receiving
from hybrid_operator.serving.usermetrics import USER_METRICS, UserMetrics
from tests.helpers import wait_until
from tests.trickling import Tricklers


@pytest.fixture(scope="module")
def shared_server() -> Iterator[ThreadingHTTPServer]:
    """One server for the module (each shutdown waits out a 0.5 s poll); each test gets a fresh store."""
    srv = receiving.server("127.0.0.1:0", UserMetrics())
    assert srv is not None
    srv.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def store() -> UserMetrics:
    return UserMetrics(limit=10, reserved=set)


@pytest.fixture
def server(shared_server: ThreadingHTTPServer, store: UserMetrics) -> ThreadingHTTPServer:
    shared_server.store = store  # type: ignore[attr-defined]
    return shared_server


def port(srv: ThreadingHTTPServer) -> int:
    return int(srv.server_address[1])


def bearer(srv: ThreadingHTTPServer) -> str:
    return f"Bearer {srv.token}"  # type: ignore[attr-defined]  # what the operator gives its runs


def request(
    srv: ThreadingHTTPServer, method: str, data: bytes | None, path: str = "/metrics", auth: str | None = ""
) -> tuple[int, str]:
    """A request as one of the operator's runs sends it (``auth`` None: none; a string: that header)."""
    headers = {"Authorization": auth or bearer(srv)} if auth is not None else {}
    req = urllib.request.Request(f"http://127.0.0.1:{port(srv)}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def raw(srv: ThreadingHTTPServer, head: bytes, body: bytes | None = b"", auth: bool = True) -> str:
    """Send a request as written, with a run's ``Authorization`` after its first line unless ``auth`` is
    False (``body`` None: send the head only and keep the connection open)."""
    if auth:
        first, sep, rest = head.partition(b"\r\n")
        head = first + b"\r\nAuthorization: " + bearer(srv).encode() + sep + rest
    with socket.create_connection(("127.0.0.1", port(srv)), timeout=5) as sock:
        sock.sendall(head + b"\r\n\r\n")
        if body is not None:
            sock.sendall(body)
            sock.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: sock.recv(4096), b"")).decode()


def test_a_valid_post_is_applied_and_answered_200(server: ThreadingHTTPServer, store: UserMetrics) -> None:
    doc = {"name": "jobs", "description": "jobs done", "counter": {"increment": True, "add": None}}
    assert request(server, "POST", json.dumps(doc).encode()) == (200, "")
    assert "jobs 1.0\n" in store.render().decode()


def test_a_malformed_post_is_answered_400_with_the_reason(server: ThreadingHTTPServer, store: UserMetrics) -> None:
    assert request(server, "POST", b'{"name": "bad name", "gauge": {}}') == (
        400,
        "name: 'bad name' is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)\n",
    )
    assert request(server, "POST", b"not json")[0] == 400
    assert len(store) == 0


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_are_answered_405(server: ThreadingHTTPServer, method: str) -> None:
    assert request(server, method, None) == (405, "Method not allowed\n")


def test_other_paths_are_answered_404(server: ThreadingHTTPServer) -> None:
    assert request(server, "POST", b"{}", path="/other")[0] == 404


def test_a_body_without_length_is_refused(server: ThreadingHTTPServer) -> None:
    answer = raw(server, b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked", b"2\r\n{}\r\n0\r\n\r\n")
    assert answer.startswith("HTTP/1.0 411")
    assert raw(server, b"POST /metrics HTTP/1.1\r\nHost: x").startswith("HTTP/1.0 411")


def test_a_huge_body_is_refused_unread(server: ThreadingHTTPServer) -> None:
    answer = raw(server, b"POST /metrics HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n" + b"{}" * 20_000, None)
    assert answer.startswith("HTTP/1.0 413") and "at most 65536" in answer


@pytest.mark.parametrize("length", [b"-1", b"ten", b"1e3", "\u0661".encode(), b"9" * 5000])
def test_a_bad_length_is_refused(server: ThreadingHTTPServer, length: bytes) -> None:
    assert raw(server, b"POST /metrics HTTP/1.1\r\nContent-Length: " + length, b"{}").startswith("HTTP/1.0 400")


def test_a_short_body_is_refused(server: ThreadingHTTPServer) -> None:
    answer = raw(server, b"POST /metrics HTTP/1.1\r\nContent-Length: 100", b'{"name": "m"')
    assert answer.startswith("HTTP/1.0 400") and "body ended after 12 of 100 bytes" in answer


def test_a_body_that_stalls_is_refused(server: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(receiving._Handler, "timeout", 0.3)
    started = time.monotonic()
    answer = raw(server, b"POST /metrics HTTP/1.1\r\nContent-Length: 10\r\n\r\n{", None)
    assert time.monotonic() - started < 3
    assert answer.startswith("HTTP/1.0 400") and "too slowly" in answer


@pytest.fixture
def own_server(store: UserMetrics) -> Iterator[BoundedServer]:
    """A server of this test's own, at its production bounds: on the shared one, a handler thread of an
    earlier test still ending could hold a place."""
    srv = receiving.server("127.0.0.1:0", store)
    assert srv is not None
    srv.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_idle_connections_past_the_cap_push_out_the_oldest_and_posts_are_served(
    own_server: BoundedServer, store: UserMetrics
) -> None:
    server, cap = own_server, receiving.BOUNDS.max_pending_per_address  # every client here is 127.0.0.1
    idle = [socket.create_connection(("127.0.0.1", port(server)), timeout=5) for _ in range(cap)]
    try:
        wait_until(lambda: server.counts()[0] == cap, 5)
        with socket.create_connection(("127.0.0.1", port(server)), timeout=5):
            assert idle[0].recv(100) == b""  # the oldest made room
        body = json.dumps({"name": "g", "gauge": {"set": 3}}).encode()
        assert request(server, "POST", body)[0] == 200
    finally:
        for sock in idle:
            sock.close()
    assert "g 3.0\n" in store.render().decode()


def test_a_role_metric_is_applied_while_clients_trickle_heads_and_bodies(
    own_server: BoundedServer, store: UserMetrics
) -> None:
    server, before = own_server, threading.active_count()
    body_trickle = b"POST /metrics HTTP/1.1\r\nContent-Length: 60000\r\n\r\n" + b"{" * 60000
    most = 0
    with (
        Tricklers(port(server), 16, head=b"POST /metrics HTTP/1.1\r\nX: " + b"x" * 60000, limit=20),
        Tricklers(port(server), 16, head=body_trickle, limit=20),
    ):
        time.sleep(1.5)  # 32 connections trickling, twice as many as may be pending
        for n in range(10):
            doc = {"name": "trickled", "gauge": {"set": n}}
            started = time.monotonic()
            assert request(server, "POST", json.dumps(doc).encode())[0] == 200
            assert time.monotonic() - started < 2
            most = max(most, threading.active_count() - before)
    assert f"trickled {9:.1f}\n" in store.render().decode()
    assert most <= 2 + receiving.BOUNDS.max_pending + 4  # two trickling threads, the pending pool, a few ending


@pytest.mark.parametrize(
    ("address", "bind"),
    [
        ("localhost:5050", ("localhost", 5050)),
        (":5050", ("localhost", 5050)),
        ("0.0.0.0:1", ("0.0.0.0", 1)),
        ("[::1]:0", ("::1", 0)),
        ("0", None),
        ("", None),
    ],
)
def test_addresses(address: str, bind: tuple[str, int] | None) -> None:
    assert receiving.parse_address(address) == bind


@pytest.mark.parametrize("address", ["localhost", "localhost:http", "localhost:70000", "5050"])
def test_bad_addresses_are_config_errors(address: str) -> None:
    with pytest.raises(ConfigError, match="--user-metrics-bind-address"):
        receiving.parse_address(address)


def test_the_operator_tells_its_runs_where_the_receiver_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(receiving.URL_ENV, "stale")
    srv = cli._role_metrics_receiver("127.0.0.1:0")
    assert srv is not None
    try:
        assert os.environ[receiving.URL_ENV] == f"http://127.0.0.1:{port(srv)}/metrics"
    finally:
        srv.stop()  # bound, not serving yet: the lifecycle starts it


def test_a_busy_port_turns_role_metrics_off_without_stopping_the_operator(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(receiving.URL_ENV, "stale")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with caplog.at_level(logging.ERROR):
            assert cli._role_metrics_receiver(f"127.0.0.1:{taken.getsockname()[1]}") is None
    assert os.environ[receiving.URL_ENV] == ""
    assert "role metrics are off" in caplog.text


def test_disabled_means_off_for_the_runs_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(receiving.URL_ENV, "stale")
    assert cli._role_metrics_receiver("0") is None
    assert os.environ[receiving.URL_ENV] == ""


def test_the_operators_metrics_endpoint_carries_the_role_metrics() -> None:
    srv = receiving.server("127.0.0.1:0")  # the operator's own store
    metrics = health.server("127.0.0.1:0", None, metrics=True)
    assert srv is not None and metrics is not None
    srv.start()
    metrics.start()
    try:
        doc = {"name": "test_receiving_backups", "description": "backups", "gauge": {"set": 2}}
        assert request(srv, "POST", json.dumps(doc).encode())[0] == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port(metrics)}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        assert "# TYPE test_receiving_backups gauge\ntest_receiving_backups 2.0\n" in text
        assert "ansible_operator_reconcile_result" in text  # the operator's own are still there
    finally:
        for s in (srv, metrics):
            s.shutdown()
            s.server_close()
    assert "test_receiving_backups" in USER_METRICS.render().decode()


# -- only the operator's runs ------------------------------------------------------------------------------


@pytest.mark.parametrize("auth", [None, "Bearer wrong", "bearer", "Basic dXNlcjpwYXNz", "Bearer " + "x" * 5000])
def test_a_local_process_without_the_runs_secret_is_refused_before_its_body(
    server: ThreadingHTTPServer, store: UserMetrics, auth: str | None
) -> None:
    """Another local user once registered a metric under another type, and every run's osdk_metric then
    failed: whoever lacks the secret the operator gives its runs is not heard."""
    squat = {"name": "jobs", "description": "taken first", "gauge": {"set": 1}}
    assert request(server, "POST", json.dumps(squat).encode(), auth=auth)[0] == 401
    assert store.render().decode().count("jobs") == 0
    run = {"name": "jobs", "description": "jobs done", "counter": {"increment": True}}
    assert request(server, "POST", json.dumps(run).encode()) == (200, "")  # the run's own, as a counter
    assert "jobs 1.0\n" in store.render().decode()


def test_every_server_has_its_own_secret() -> None:
    first, second = receiving.server("127.0.0.1:0", UserMetrics()), receiving.server("127.0.0.1:0", UserMetrics())
    try:
        assert first is not None and second is not None and first.token != second.token
        assert len(first.token) >= 32
    finally:
        for srv in (first, second):
            if srv is not None:
                srv.stop()
