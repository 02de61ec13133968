"""The bounds every server of ours shares, against hostile clients on real loopback sockets: a head that
trickles is closed at its deadline, not at a timeout per read; pending connections are capped per address
and in all, the busiest address paying; served ones are capped per key and in all (503); a client that
hangs up is one debug line, never a traceback. The servers themselves are tried in their own tests."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from hybrid_operator.httpbounds import BoundedHandler, BoundedServer, Bounds
from tests.helpers import wait_until
from tests.trickling import Tricklers

Serve = Callable[[Bounds], BoundedServer]
HOLD = threading.Event()  # /hold answers once this is set (at most 10 s): a served slot kept on purpose


class Handler(BoundedHandler):
    timeout = 5.0  # per read after the head: longer than any deadline below, so only the deadline cuts

    def do_GET(self) -> None:
        if self.path == "/hold":
            HOLD.wait(10)
        if self.path == "/bug":
            raise RuntimeError("a bug of ours")
        body = b"x" * (4 << 20) if self.path == "/big" else b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def serve() -> Iterator[Serve]:
    servers: list[BoundedServer] = []

    def start(bounds: Bounds) -> BoundedServer:
        server = BoundedServer(("127.0.0.1", 0), Handler, bounds, "test server")
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    HOLD.clear()
    yield start
    HOLD.set()
    for server in servers:
        server.shutdown()
        server.server_close()


def port(server: BoundedServer) -> int:
    return int(server.server_address[1])


def get(server: BoundedServer, path: str = "/", source: str = "127.0.0.1", wait: float = 5.0) -> int:
    """The status of one GET (0: closed unanswered)."""
    with socket.create_connection(("127.0.0.1", port(server)), timeout=wait, source_address=(source, 0)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        answer = sock.recv(64)
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0


def test_a_trickling_head_is_closed_at_the_deadline_not_a_timeout_per_read(serve: Serve) -> None:
    server = serve(Bounds(max_connections=4, max_served_per_key=4, head_deadline=1.0))
    silent = socket.create_connection(("127.0.0.1", port(server)), timeout=5)
    started = time.monotonic()
    with Tricklers(port(server), 3, every=0.2, limit=10) as tricklers:  # a byte every 0.2 s: no read waits 5 s
        assert silent.recv(10) == b""
        silent_for = time.monotonic() - started
        wait_until(lambda: len(tricklers.lifetimes) >= 3, 5)
    silent.close()
    assert 0.9 <= silent_for < 2.5
    assert all(0.9 <= lasted < 2.5 for lasted in tricklers.lifetimes[:3]), tricklers.lifetimes


def test_a_head_that_arrives_slowly_but_in_time_is_served(serve: Serve) -> None:
    server = serve(Bounds(max_connections=4, max_served_per_key=4, head_deadline=2.0))
    with socket.create_connection(("127.0.0.1", port(server)), timeout=5) as sock:
        for part in (b"GET / HT", b"TP/1.1\r\n", b"Host: x\r\n", b"\r\n"):
            sock.sendall(part)
            time.sleep(0.3)
        assert sock.recv(64).startswith(b"HTTP/1.0 200")


def test_pending_connections_are_capped_and_the_busiest_address_pays(serve: Serve) -> None:
    bounds = Bounds(max_connections=8, max_served_per_key=8, max_pending=6, max_pending_per_address=4, head_deadline=30)
    server = serve(bounds)
    with (
        Tricklers(port(server), 2, every=0.3, source="127.0.0.2") as quiet,
        Tricklers(port(server), 12, every=0.3, source="127.0.0.1") as loud,
    ):
        time.sleep(2.5)
        assert server.counts()[0] <= 6
        assert quiet.lifetimes == [] and quiet.open == 2  # never pushed out by the other address's flood
        assert len(loud.lifetimes) >= 8  # 12 tried, 4 fit: the rest pushed out their own, round after round
        started = time.monotonic()
        assert get(server, source="127.0.0.1") == 200  # a real client of the loud address still gets in
        assert get(server, source="127.0.0.3") == 200
        assert time.monotonic() - started < 2


def test_served_connections_are_capped_per_key_and_in_all(serve: Serve) -> None:
    server = serve(Bounds(max_connections=3, max_served_per_key=2))
    held = [threading.Thread(target=get, args=(server, "/hold", "127.0.0.1", 15)) for _ in range(2)]
    held.append(threading.Thread(target=get, args=(server, "/hold", "127.0.0.2", 15)))
    for thread in held:
        thread.start()
    wait_until(lambda: server.counts()[1] == 3, 5)
    assert get(server, source="127.0.0.2") == 503  # all three slots taken
    HOLD.set()
    for thread in held:
        thread.join(15)
    assert get(server) == 200


def test_the_per_key_cap_answers_503_before_the_total(serve: Serve) -> None:
    server = serve(Bounds(max_connections=8, max_served_per_key=1))
    holder = threading.Thread(target=get, args=(server, "/hold", "127.0.0.1", 15))
    holder.start()
    wait_until(lambda: server.counts()[1] == 1, 5)
    assert get(server, source="127.0.0.1") == 503
    assert get(server, source="127.0.0.2") == 200
    HOLD.set()
    holder.join(15)


def test_threads_stay_bounded_however_many_connections_trickle(serve: Serve) -> None:
    server = serve(Bounds(max_connections=4, max_served_per_key=4, max_pending=8, max_pending_per_address=8))
    before = threading.active_count()
    most = 0
    with Tricklers(port(server), 150, every=0.5, limit=10):
        ends = time.monotonic() + 3
        while time.monotonic() < ends:
            most = max(most, threading.active_count() - before)
            time.sleep(0.05)
        assert get(server) == 200
    assert most <= 1 + 8 + 4  # the tricklers' own thread, the pending pool, a few ending after their cut


def hang_up(server: BoundedServer, data: bytes, pause: float = 0.0) -> None:
    """Send ``data`` and go away with a reset (SO_LINGER 0), as a killed client does."""
    sock = socket.create_connection(("127.0.0.1", port(server)), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.sendall(data)
    time.sleep(pause)
    sock.close()


def test_clients_that_hang_up_leave_one_debug_line_and_no_traceback(
    serve: Serve, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    server = serve(Bounds(max_connections=8, max_served_per_key=8))
    with caplog.at_level(logging.DEBUG, logger="hybrid_operator.httpbounds"):
        for _ in range(10):
            hang_up(server, b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n", pause=0.05)  # gone while 4 MiB are written
            hang_up(server, b"GET / HT")  # gone mid-head
        wait_until(lambda: "went away" in caplog.text, 5)
        assert get(server) == 200
    assert not [r for r in caplog.records if r.exc_info or r.levelno > logging.DEBUG]
    assert "Traceback" not in capfd.readouterr().err


def test_a_bug_of_ours_is_logged_with_its_traceback_through_logging(
    serve: Serve, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    server = serve(Bounds(max_connections=8, max_served_per_key=8))
    assert get(server, "/bug") == 0
    wait_until(lambda: any(r.exc_info for r in caplog.records), 5)
    assert "RuntimeError: a bug of ours" in caplog.text
    assert "Traceback" not in capfd.readouterr().err


def test_a_head_larger_than_the_bound_is_dropped(serve: Serve) -> None:
    server = serve(Bounds(max_connections=4, max_served_per_key=4, max_head_bytes=4096))
    with socket.create_connection(("127.0.0.1", port(server)), timeout=5) as sock:
        try:
            sock.sendall(b"GET / HTTP/1.1\r\n" + b"X-Pad: " + b"p" * 2000 + b"\r\n" * 1 + b"X-More: " + b"m" * 8000)
            answer = sock.recv(64)
        except ConnectionResetError:
            answer = b""
    assert answer == b""
    assert get(server) == 200


@pytest.mark.parametrize(
    "bounds",
    [
        {"max_connections": 0, "max_served_per_key": 1},
        {"max_connections": 1, "max_served_per_key": 1, "head_deadline": 0},
        {"max_connections": 1, "max_served_per_key": 1, "max_pending": 0},
    ],
)
def test_unusable_bounds_are_refused(bounds: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="unusable HTTP bounds"):
        Bounds(**bounds)  # type: ignore[arg-type]
