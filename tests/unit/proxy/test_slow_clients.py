"""The run proxy against slow and vanishing clients, as the attack of issue 22 ran it: connections that send
one header byte a second took every slot and new runs got 503 for as long as the trickle lasted; clients
hanging up printed raw tracebacks. Here the same attack, at the proxy's production bounds, must leave the
runs served and the log clean. The API server behind it is the fake one of ``conftest``."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client

from hybrid_operator.kube.client import Kube
from hybrid_operator.proxy.server import ApiProxy
from tests.helpers import wait_until
from tests.trickling import Tricklers
from tests.unit.proxy.test_server import Upstream, raw, req, status_of, token


def start(upstream: Upstream, **bounds: float) -> ApiProxy:
    config = k8s_client.Configuration()
    config.host = upstream.host
    p = ApiProxy(Kube(k8s_client.ApiClient(config)), inject=True, on_child=lambda c: None, **bounds)  # type: ignore[arg-type]
    p.start()
    return p


@pytest.fixture
def production(upstream: Upstream) -> Iterator[ApiProxy]:
    """The proxy as the operator starts it: 64 runs' slots, 32 pending heads, 5 s for a head."""
    p = start(upstream)
    yield p
    p.stop()


def port_of(proxy: ApiProxy) -> int:
    return int(proxy.address.rsplit(":", 1)[1])


def test_runs_are_served_while_64_connections_trickle_their_heads(production: ApiProxy, upstream: Upstream) -> None:
    proxy = production
    assert proxy._server is not None
    with Tricklers(port_of(proxy), 64, every=1.0, limit=30) as tricklers:
        time.sleep(1.5)  # all 64 connected and trickling
        for _ in range(20):
            started = time.monotonic()
            assert status_of(raw(proxy, req(proxy))) == 200
            assert time.monotonic() - started < 2
        pending, served = proxy._server.counts()
        assert pending <= 32 and served == 0  # the trickle holds none of the runs' slots
        first = tricklers.opened
        time.sleep(5.5)  # past the head's deadline: every one of the first connections was closed by now
        assert len(tricklers.lifetimes) >= first
        assert max(tricklers.lifetimes) < 5 + 1.5
    assert len(upstream.seen) == 20


def test_a_trickling_head_is_closed_at_the_deadline(upstream: Upstream) -> None:
    proxy = start(upstream, head_deadline=1.0, socket_timeout=30.0)
    try:
        with Tricklers(port_of(proxy), 4, every=0.25, limit=10) as tricklers:  # a byte well within any timeout
            wait_until(lambda: len(tricklers.lifetimes) >= 4, 5)
        assert all(0.9 <= lasted < 2.5 for lasted in tricklers.lifetimes[:4]), tricklers.lifetimes
    finally:
        proxy.stop()


def test_one_run_cannot_take_every_slot(upstream: Upstream) -> None:
    proxy = start(upstream, max_connections=4, socket_timeout=5.0)
    mine = token(proxy, "greedy")
    head = (
        f"POST /api/v1/namespaces/ns/configmaps HTTP/1.1\r\nAuthorization: Bearer {mine}\r\nContent-Length: 100\r\n\r\n"
    )
    held = [socket.create_connection(("127.0.0.1", port_of(proxy)), timeout=10) for _ in range(2)]
    try:
        for sock in held:  # a head with the run's token and a body that never comes: a slot held 5 s
            sock.sendall(head.encode())
        assert proxy._server is not None
        wait_until(lambda: proxy._server is not None and proxy._server.counts()[1] == 2, 5)
        again = f"GET /api/v1/pods HTTP/1.1\r\nAuthorization: Bearer {mine}\r\n\r\n".encode()
        assert status_of(raw(proxy, again)) == 503  # half the slots is this run's share
        assert status_of(raw(proxy, req(proxy))) == 200  # another run still gets in
    finally:
        for sock in held:
            sock.close()


def hang_up(port: int, data: bytes, pause: float) -> None:
    """Send ``data``, wait ``pause`` and go away with a reset (SO_LINGER 0), as a killed client does."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.sendall(data)
    time.sleep(pause)
    sock.close()


def test_clients_that_hang_up_leave_no_traceback(
    production: ApiProxy, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    proxy, port = production, port_of(production)
    forged = b"GET /api/v1/pods HTTP/1.1\r\nAuthorization: Bearer forged-token-0123456789\r\n\r\n"
    kinds = [
        (b"GET /api/v1/po", 0.0),  # mid-head
        (forged, 0.0),  # gone before its 401 is written
        (req(proxy), 0.0),  # a run gone before its answer
        (req(proxy, "POST", "/api/v1/namespaces/ns/configmaps", "Content-Length: 50\r\n") + b"{", 0.05),  # mid-body
    ]
    with caplog.at_level(logging.DEBUG):
        threads = [
            threading.Thread(target=hang_up, args=(port, data, pause)) for _ in range(20) for data, pause in kinds
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert status_of(raw(proxy, req(proxy))) == 200
        time.sleep(0.5)  # the last handlers end
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING], caplog.text
    assert "Traceback" not in capfd.readouterr().err
