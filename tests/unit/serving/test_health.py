"""The probe server against slow clients on real loopback sockets: the kubelet's probes are answered while
twice as many connections as may wait trickle their heads, from one address or several, and the threads
they cost stay bounded (before: 1,500 trickling connections held 1,310 threads). TLS and the metrics gate
are tried in test_tlsserving.py."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

from hybrid_operator.httpbounds import BoundedServer
from hybrid_operator.serving import health
from tests.trickling import Tricklers


@pytest.fixture
def probes_server() -> Iterator[BoundedServer]:
    probes = health.Probes()
    probes.live["workers"] = lambda: (True, "moving")
    server = health.server("127.0.0.1:0", probes, metrics=False)
    assert server is not None
    server.start()
    yield server
    server.shutdown()
    server.server_close()


def probe(server: BoundedServer, source: str = "127.0.0.1") -> int:
    """/healthz as the kubelet asks it, from ``source``; the status, within 2 s or the test fails."""
    opener = urllib.request.build_opener()
    started = time.monotonic()
    port = server.server_address[1]
    if source == "127.0.0.1":
        with opener.open(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            status = int(resp.status)
    else:  # urllib cannot pick a source address: the same request by hand
        with socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0)) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            status = int(sock.recv(64).split(b" ", 2)[1])
    assert time.monotonic() - started < 2
    return status


def test_probes_are_answered_while_twice_the_pending_cap_trickles(probes_server: BoundedServer) -> None:
    server, before, most = probes_server, threading.active_count(), 0
    spread = [f"127.0.0.{n}" for n in range(2, 10)]  # 8 addresses x 16 = 128, twice as many as may wait
    trickles = [Tricklers(int(server.server_address[1]), 16, source=source, limit=20) for source in spread]
    for tricklers in trickles:
        tricklers.__enter__()
    try:
        time.sleep(1.5)
        for _ in range(10):
            assert probe(server) == 200
            most = max(most, threading.active_count() - before)
        assert server.counts()[0] <= health.BOUNDS.max_pending
    finally:
        for tricklers in trickles:
            tricklers.__exit__(None, None, None)
    assert most <= len(trickles) + health.BOUNDS.max_pending + 4  # their threads, the pool, a few ending


def test_one_address_trickling_pushes_out_only_its_own(probes_server: BoundedServer) -> None:
    port = int(probes_server.server_address[1])
    with (
        Tricklers(port, 1, every=0.5, source="127.0.0.3", limit=20) as other,
        Tricklers(port, 64, every=0.5, source="127.0.0.2", limit=20) as loud,
    ):
        time.sleep(3)  # under the head's deadline: only the caps close anything
        assert probe(probes_server, source="127.0.0.2") == 200  # a real client of the loud address gets in
        assert other.lifetimes == [] and other.open == 1
        assert len(loud.lifetimes) >= 64 - health.BOUNDS.max_pending_per_address
