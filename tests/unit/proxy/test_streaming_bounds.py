"""What bounds a run's streams through the proxy once no silence timeout does: a cap per run, a deadline
per stream, the run's end, the proxy's stop; and the head deadline before any of it. A client that upgrades
and then sends nothing, or stops reading, is held until the stream's deadline and not a moment longer."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import parse_qsl, quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.proxy import accepting, streaming
from hybrid_operator.proxy.server import ApiProxy
from tests.helpers import wait_until
from tests.trickling import Tricklers
from tests.unit.proxy.streamingapi import StreamingApi
from tests.unit.proxy.test_server import status_of
from tests.unit.proxy.test_streaming import EXEC, echo, port_of, send, start, token, upgrade


@pytest.fixture
def api() -> Iterator[StreamingApi]:
    fake = StreamingApi()
    yield fake
    fake.stop()


def watch(proxy: ApiProxy, run: str = "run1", value: str = "true") -> tuple[socket.socket, bytes, bytes]:
    return get(proxy, f"/api/v1/namespaces/ns/configmaps?watch={value}", run)


def get(proxy: ApiProxy, target: str, run: str = "run1") -> tuple[socket.socket, bytes, bytes]:
    return send(proxy, f"GET {target} HTTP/1.1\r\nAuthorization: Bearer {token(proxy, run)}\r\n\r\n")


def closed_within(sock: socket.socket, seconds: float, seen: bytearray | None = None) -> float | None:
    """How long until the proxy closed ``sock`` (reading whatever still came, into ``seen``), or None."""
    started = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - started < seconds:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - started
        if not data:
            return time.monotonic() - started
        if seen is not None:
            seen += data
    return None


def test_a_run_holds_at_most_its_share_of_streams(api: StreamingApi) -> None:
    proxy = start(api, max_streams_per_run=2)
    try:
        first, answer1, _ = upgrade(proxy)
        second, answer2, _ = watch(proxy)  # a watch counts as much as an exec
        assert status_of(answer1) == 101 and status_of(answer2) == 200
        third, answer3, _ = upgrade(proxy)
        assert status_of(answer3) == 429
        other, answer4, _ = upgrade(proxy, run="run2")  # another run has its own share
        assert status_of(answer4) == 101 and echo(other, b"mine") == b"mine"
        assert proxy.streams.count(token(proxy)) == 2
        first.close()
        wait_until(lambda: proxy.streams.count(token(proxy)) == 1, 3)
        again, answer5, _ = upgrade(proxy)
        assert status_of(answer5) == 101 and echo(again, b"back") == b"back"
        for sock in (second, third, other, again):
            sock.close()
    finally:
        proxy.stop()


@pytest.mark.parametrize("kind", ["exec", "watch"])
def test_a_silent_stream_ends_at_its_deadline(api: StreamingApi, kind: str) -> None:
    """A client that upgrades and then sends nothing (or a watch nobody writes to) is held no longer than
    the run's stream bound: here 1 s. The watch ends as the API server ends one at its timeout, cleanly,
    so a client simply watches again."""
    api.every = 30  # the watch sends its first event, then nothing
    proxy = start(api, max_stream_seconds=1.0)
    try:
        sock, answer, rest = upgrade(proxy) if kind == "exec" else watch(proxy)
        assert status_of(answer) in (101, 200)
        seen = bytearray(rest)
        lasted = closed_within(sock, 5, seen)
        assert lasted is not None and 0.5 <= lasted <= 2.0, lasted
        assert kind == "exec" or seen.endswith(b"\r\n0\r\n\r\n"), bytes(seen)
        wait_until(lambda: api.live == 0 and proxy.streams.count() == 0, 3)  # the API server's end too
        wait_until(lambda: proxy._server is not None and proxy._server.counts() == (0, 0), 3)  # slot freed
        sock.close()
    finally:
        proxy.stop()


def test_a_client_that_stops_reading_is_cut_at_the_deadline(api: StreamingApi) -> None:
    """It sends and never reads the echo: every buffer on the way fills and the relay waits, bounded."""
    proxy = start(api, max_stream_seconds=1.5)
    try:
        sock, answer, _ = upgrade(proxy)
        assert status_of(answer) == 101
        sock.settimeout(0.2)
        sent, started = 0, time.monotonic()
        while time.monotonic() - started < 5:
            try:
                sent += sock.send(b"x" * 65536)
            except TimeoutError:
                continue  # full: the proxy reads no more from us until its echo is taken
            except OSError:
                break  # cut
        lasted = time.monotonic() - started
        assert sent > 256 * 1024 and lasted < 3, (sent, lasted)
        wait_until(lambda: api.live == 0, 3)
        sock.close()
    finally:
        proxy.stop()


def test_every_stream_of_a_run_ends_with_the_run(api: StreamingApi) -> None:
    proxy = start(api, max_streams_per_run=4)
    try:
        execs = [upgrade(proxy)[0], upgrade(proxy)[0]]
        watched = watch(proxy)[0]
        bystander, _, _ = upgrade(proxy, run="run2")
        wait_until(lambda: api.live == 4, 3)
        proxy.revoke("run1")
        for sock in [*execs, watched]:
            lasted = closed_within(sock, 3)
            assert lasted is not None and lasted < 1.0, lasted
        assert echo(bystander, b"still here") == b"still here"  # another run's exec goes on
        wait_until(lambda: api.live == 1, 3)
        gone, answer, _ = upgrade(proxy)  # the ended run's token
        assert status_of(answer) == 401
        for sock in [*execs, watched, bystander, gone]:
            sock.close()
    finally:
        proxy.stop()


def test_a_stream_cannot_outlive_a_run_that_ended_after_its_token_was_checked() -> None:
    streams = streaming.Streams(lambda key: False, max_per_run=4, max_seconds=60)
    with pytest.raises(accepting.BadRequest) as refused, streams.open("ended"):
        pass
    assert refused.value.status == 401 and streams.count() == 0


def test_a_socket_held_after_its_stream_was_cut_is_cut_at_once() -> None:
    streams = streaming.Streams(lambda key: True, max_per_run=4, max_seconds=60)
    left, right = socket.socketpair()
    with left, right, streams.open("run") as stream:
        streams.close_run("run")
        streams.hold(stream, left)
        left.settimeout(1)
        assert left.recv(10) == b""  # shut down: no blocking read on it can outlive the cut


def test_stopping_the_proxy_ends_every_stream(api: StreamingApi) -> None:
    proxy = start(api)
    sock, answer, _ = upgrade(proxy)
    assert status_of(answer) == 101
    proxy.stop()
    assert closed_within(sock, 3) is not None
    sock.close()


def test_an_upgrade_head_still_has_the_head_deadline(api: StreamingApi) -> None:
    """A head trickled in, upgrade headers and all, is closed at the 1 s head deadline; nothing is asked."""
    proxy = start(api)
    try:
        head = f"GET {EXEC} HTTP/1.1\r\nAuthorization: Bearer {token(proxy)}\r\nConnection: Upgrade\r\nUpgrade: web"
        with Tricklers(port_of(proxy), 4, head=head.encode(), every=0.2, limit=10) as tricklers:
            wait_until(lambda: len(tricklers.lifetimes) >= 4, 5)
        assert all(0.9 <= lasted < 2.5 for lasted in tricklers.lifetimes[:4]), tricklers.lifetimes
        assert api.heads == [] and api.reviews == []
    finally:
        proxy.stop()


def test_many_streams_at_once_each_get_their_own_bytes(api: StreamingApi) -> None:
    proxy = start(api, max_connections=16, max_streams_per_run=8)
    errors: list[str] = []

    def one(number: int) -> None:
        sock, answer, _ = upgrade(proxy, run=f"run{number % 3}")
        with sock:
            if status_of(answer) != 101:
                errors.append(f"{number}: {answer[:40]!r}")
                return
            for round_ in range(20):
                payload = f"{number}-{round_}-".encode() * 100
                if echo(sock, payload) != payload:
                    errors.append(f"{number}: mixed up")
                    return

    try:
        threads = [threading.Thread(target=one, args=(n,)) for n in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        assert errors == []
    finally:
        proxy.stop()


# -- whatever the query says ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["yes", "t", "on", "", "TRUE", "1", "%74rue", "false%00"])
def test_a_watch_by_any_spelling_counts_against_the_cap_and_ends_with_its_run(api: StreamingApi, value: str) -> None:
    """``watch=yes`` (and ``t``, ``on``, empty...) is a watch to the API server: it used to pass as a plain
    request, outside the cap, and went on delivering events after its run ended."""
    proxy = start(api, max_streams_per_run=2)
    try:
        first, answer1, _ = watch(proxy, value=value)
        second, answer2, _ = watch(proxy, value=value)
        third, answer3, _ = watch(proxy, value=value)
        assert [status_of(a) for a in (answer1, answer2, answer3)] == [200, 200, 429]
        wait_until(lambda: api.live == 2, 3)
        proxy.revoke("run1")
        for sock in (first, second):
            lasted = closed_within(sock, 3)
            assert lasted is not None and lasted < 1.0, lasted
        wait_until(lambda: api.live == 0 and proxy.streams.count(plain=True) == 0, 3)
        for sock in (first, second, third):
            sock.close()
    finally:
        proxy.stop()


@pytest.mark.parametrize("value", ["false", "FALSE", "0"])
def test_what_the_api_server_takes_for_no_watch_is_a_plain_request(api: StreamingApi, value: str) -> None:
    proxy = start(api, max_streams_per_run=1)
    try:
        answers = [watch(proxy, value=value) for _ in range(3)]
        assert [status_of(a) for _, a, _ in answers] == [200] * 3  # no cap: each was answered and ended
        for sock, _, _ in answers:
            sock.close()
    finally:
        proxy.stop()


def test_a_plain_answer_that_trickles_ends_at_the_deadline(api: StreamingApi) -> None:
    """A byte every 0.2 s is never silent for the 30 s the silence timeout waits: a pod's server behind the
    proxy subresource could hold a run's request (and its worker) forever that way."""
    api.every = 0.2
    proxy = start(api, max_stream_seconds=1.0)
    try:
        sock, answer, _ = get(proxy, "/api/v1/namespaces/ns/services/slow:80/proxy/health")
        assert status_of(answer) == 200
        lasted = closed_within(sock, 5)
        assert lasted is not None and 0.5 <= lasted <= 2.0, lasted
        wait_until(lambda: api.live == 0 and proxy.streams.count(plain=True) == 0, 3)
        sock.close()
    finally:
        proxy.stop()


def test_a_plain_answer_that_trickles_ends_with_its_run(api: StreamingApi) -> None:
    api.every = 0.2
    proxy = start(api, max_streams_per_run=1)
    try:
        requests = [get(proxy, "/api/v1/namespaces/ns/services/slow:80/proxy/")[0] for _ in range(3)]
        wait_until(lambda: api.live == 3, 3)  # plain requests: not held to the streams' cap
        assert proxy.streams.count(token(proxy)) == 0 and proxy.streams.count(token(proxy), plain=True) == 3
        proxy.revoke("run1")
        for sock in requests:
            lasted = closed_within(sock, 3)
            assert lasted is not None and lasted < 1.0, lasted
            sock.close()
        wait_until(lambda: api.live == 0, 3)
    finally:
        proxy.stop()


def _api_server_bool(values: list[str]) -> bool:
    """apimachinery's Convert_Slice_string_To_bool, as written there."""
    return bool(values) and values[0] != "0" and values[0].lower() != "false"


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=8), st.sampled_from(["", "&watch=false", "&limit=5", "&watch=1"]))
def test_the_proxy_never_takes_a_watch_for_less_than_the_api_server_does(value: str, more: str) -> None:
    target = f"/api/v1/namespaces/ns/pods?watch={quote(value, safe='')}{more}"
    values = [v for k, v in parse_qsl(target.partition("?")[2], keep_blank_values=True) if k == "watch"]
    if _api_server_bool(values):
        assert streaming.streamed("GET", target)
    assert streaming.streamed("GET", target) == any(_api_server_bool([v]) for v in values)
