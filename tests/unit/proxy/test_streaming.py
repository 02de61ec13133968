"""Connection upgrades and streams through the run proxy, against the fake API server of ``streamingapi``:
exec, attach and port-forward relayed both ways after the API server's 101, authorized as ``create`` on
the subresource with the operator's credentials; refusals relayed as answers; forged or malformed upgrade
requests served as plain HTTP or refused; watches and followed logs relayed as they come, past the
silence timeout of plain requests. Bounds (caps, deadlines, the run's end) are in ``test_streaming_bounds``.
"""

from __future__ import annotations

import itertools
import json
import socket
import time
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client as k8s_client

from hybrid_operator.kube import reviews
from hybrid_operator.kube.client import Kube
from hybrid_operator.proxy import streaming
from hybrid_operator.proxy.server import ApiProxy
from tests.helpers import wait_until
from tests.unit.proxy.streamingapi import StreamingApi
from tests.unit.proxy.test_server import OWNER, status_of

OPERATOR_TOKEN = "operator-credential-0123456789"
EXEC = "/api/v1/namespaces/ns/pods/web-0/exec?command=sh&stdin=true&stdout=true"
WEBSOCKET = (
    "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io, v4.channel.k8s.io\r\n"
)


def start(api: StreamingApi, **settings: Any) -> ApiProxy:
    config = k8s_client.Configuration()
    config.host = api.host
    config.api_key = {"authorization": OPERATOR_TOKEN}
    config.api_key_prefix = {"authorization": "Bearer"}
    bounds: dict[str, Any] = {
        "max_connections": 8,
        "socket_timeout": 2.0,
        "head_deadline": 1.0,
        "upstream_silence": 0.5,
        "max_streams_per_run": 2,
        "max_stream_seconds": 30.0,
        **settings,
    }
    proxy = ApiProxy(Kube(k8s_client.ApiClient(config)), inject=True, on_child=lambda c: None, **bounds)
    proxy.start()
    return proxy


@pytest.fixture
def api() -> Iterator[StreamingApi]:
    fake = StreamingApi()
    yield fake
    fake.stop()


@pytest.fixture
def proxy(api: StreamingApi) -> Iterator[ApiProxy]:
    p = start(api)
    yield p
    p.stop()


_TOKENS: weakref.WeakKeyDictionary[ApiProxy, dict[str, str]] = weakref.WeakKeyDictionary()


def token(proxy: ApiProxy, run_id: str = "run1") -> str:
    """The token of run ``run_id`` (one kubeconfig per run, as the reconciler writes it)."""
    runs = _TOKENS.setdefault(proxy, {})
    if run_id not in runs:
        runs[run_id] = str(json.loads(proxy.kubeconfig_for(OWNER, run_id))["users"][0]["user"]["token"])
    return runs[run_id]


def port_of(proxy: ApiProxy) -> int:
    return int(proxy.address.rsplit(":", 1)[1])


def send(proxy: ApiProxy, head: str, extra: bytes = b"") -> tuple[socket.socket, bytes, bytes]:
    """Send a request head (and ``extra`` right behind it); the socket, the answer's head and what followed."""
    sock = socket.create_connection(("127.0.0.1", port_of(proxy)), timeout=5)
    sock.sendall(head.encode("latin-1") + extra)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    answer, _, rest = data.partition(b"\r\n\r\n")
    return sock, answer, rest


def upgrade(
    proxy: ApiProxy, target: str = EXEC, *, run: str = "run1", headers: str = WEBSOCKET, method: str = "GET"
) -> tuple[socket.socket, bytes, bytes]:
    credential = f"Authorization: Bearer {token(proxy, run)}"
    return send(proxy, f"{method} {target} HTTP/1.1\r\nHost: x\r\n{credential}\r\n{headers}\r\n")


def read_until_closed(sock: socket.socket, rest: bytes = b"") -> bytes:
    data = rest
    while chunk := sock.recv(65536):
        data += chunk
    return data


def echo(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    got = b""
    while len(got) < len(data):
        got += sock.recv(65536)
    return got


def test_an_exec_is_relayed_both_ways_with_the_operators_credentials(proxy: ApiProxy, api: StreamingApi) -> None:
    sock, answer, _ = upgrade(proxy)
    with sock:
        assert answer.startswith(b"HTTP/1.1 101 ")
        assert b"Sec-WebSocket-Protocol: v5.channel.k8s.io" in answer
        for size in (1, 5000, 300_000):  # a byte, a line, more than the relay buffers at once
            payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
            assert echo(sock, payload) == payload
    head = api.heads[-1]
    assert (head.method, head.target) == ("GET", EXEC)
    assert head.get("Authorization") == [f"Bearer {OPERATOR_TOKEN}"]  # never the run's token
    assert head.get("Upgrade") == ["websocket"] and head.get("Connection") == ["Upgrade"]
    assert head.get("Sec-WebSocket-Key") == ["dGhlIHNhbXBsZSBub25jZQ=="]
    assert head.get("Sec-WebSocket-Protocol") == ["v5.channel.k8s.io, v4.channel.k8s.io"]
    attributes = api.reviews[-1]["spec"]["resourceAttributes"]  # type: ignore[index]
    assert attributes == {
        "verb": "create",
        "resource": "pods",
        "subresource": "exec",
        "namespace": "ns",
        "name": "web-0",
    }


@pytest.mark.parametrize("sub", ["attach", "portforward"])
def test_attach_and_port_forward_are_authorized_as_what_they_are(proxy: ApiProxy, api: StreamingApi, sub: str) -> None:
    sock, answer, _ = upgrade(proxy, f"/api/v1/namespaces/ns/pods/web-0/{sub}?ports=80")
    with sock:
        assert answer.startswith(b"HTTP/1.1 101 ")
        assert echo(sock, b"ping") == b"ping"
    assert api.reviews[-1]["spec"]["resourceAttributes"]["subresource"] == sub  # type: ignore[index]


def test_small_frames_are_passed_on_at_once(proxy: ApiProxy) -> None:
    """An exec's frames are small and come in pairs (a WebSocket header, then its data). With Nagle's
    algorithm on the relay's sockets, a frame's second half could wait for the first's delayed ACK (40 ms):
    4 MiB through `cat` on a real node took 2.2 s through the proxy and 0.14 s directly."""
    sock, answer, _ = upgrade(proxy)
    with sock:
        assert answer.startswith(b"HTTP/1.1 101 ")
        wait_until(lambda: len(proxy.streams.sockets()) == 2, 3)
        for relayed in proxy.streams.sockets():
            assert relayed.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Kubernetes' clients do
        for number in range(20):
            sock.sendall(b"\x00")
            sock.sendall(b"%d" % (number % 10))
            expected = b"\x00%d" % (number % 10)
            got = b""
            while len(got) < len(expected):
                got += sock.recv(100)
            assert got == expected


def test_spdy_keeps_every_protocol_version_the_client_offers(proxy: ApiProxy, api: StreamingApi) -> None:
    """kubectl's SPDY exec is a POST naming several versions, one header each; the API server picks one."""
    spdy = (
        "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n"
        "X-Stream-Protocol-Version: v4.channel.k8s.io\r\nX-Stream-Protocol-Version: v3.channel.k8s.io\r\n"
    )
    sock, answer, _ = upgrade(proxy, headers=spdy, method="POST")
    with sock:
        assert answer.startswith(b"HTTP/1.1 101 ") and b"X-Stream-Protocol-Version: v4.channel.k8s.io" in answer
        assert echo(sock, b"spdy frames") == b"spdy frames"
    head = api.heads[-1]
    assert head.method == "POST" and head.get("Upgrade") == ["SPDY/3.1"]
    assert head.get("X-Stream-Protocol-Version") == ["v4.channel.k8s.io", "v3.channel.k8s.io"]


def test_bytes_right_behind_either_head_are_not_lost(proxy: ApiProxy, api: StreamingApi) -> None:
    """The API server's first frame may come in the 101's packet; a client may send before it sees the 101."""
    api.early = b"first frame"
    head = f"GET {EXEC} HTTP/1.1\r\nAuthorization: Bearer {token(proxy)}\r\n{WEBSOCKET}\r\n"
    sock, answer, rest = send(proxy, head, extra=b"eager")
    with sock:
        assert answer.startswith(b"HTTP/1.1 101 ")
        expected = b"first frameeager"  # the early frame, then the echo of what the client sent early
        while len(rest) < len(expected):
            rest += sock.recv(65536)
        assert rest == expected


def test_an_exec_the_operator_may_not_create_is_refused_before_the_api_server(
    proxy: ApiProxy, api: StreamingApi
) -> None:
    api.allowed = False
    sock, answer, rest = upgrade(proxy)
    with sock:
        assert status_of(answer) == 403 and b"pods/exec" in read_until_closed(sock, rest)
    assert [h for h in api.heads if "/exec" in h.target] == []


@pytest.mark.parametrize("credential", ["", "Authorization: Bearer forged-token-0123456789\r\n"])
def test_an_upgrade_without_a_runs_token_gets_401_and_asks_nothing(
    proxy: ApiProxy, api: StreamingApi, credential: str
) -> None:
    sock, answer, _ = send(proxy, f"GET {EXEC} HTTP/1.1\r\n{credential}{WEBSOCKET}\r\n")
    with sock:
        assert status_of(answer) == 401
    assert api.heads == [] and api.reviews == []


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_refused_upgrade_comes_back_as_a_plain_answer(proxy: ApiProxy, api: StreamingApi, chunked: bool) -> None:
    """The API server keeps its connection open after a 4xx/5xx: the proxy must end the answer by itself."""
    status = {"kind": "Status", "code": 500, "message": "unable to upgrade connection: pod not running"}
    api.refusal = (500, json.dumps(status).encode(), chunked)
    started = time.monotonic()
    sock, answer, rest = upgrade(proxy)
    with sock:
        assert status_of(answer) == 500
        assert json.loads(read_until_closed(sock, rest)) == status
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("target", "headers"),
    [
        ("/api/v1/namespaces/ns/configmaps", WEBSOCKET),  # not an upgradable path
        ("/api/v1/namespaces/ns/pods/web-0/log", WEBSOCKET),
        ("/api/v1/namespaces/ns/pods/web-0/proxy/", WEBSOCKET),
        (EXEC, "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n"),
        (EXEC, "Upgrade: websocket\r\n"),  # not named in Connection
        (EXEC, "Connection: Upgrade\r\nUpgrade: websocket\r\nUpgrade: SPDY/3.1\r\n"),
        (EXEC, "Connection: Upgrade\r\nUpgrade: websocket, SPDY/3.1\r\n"),
    ],
)
def test_an_upgrade_the_proxy_does_not_relay_is_served_as_plain_http(
    proxy: ApiProxy, api: StreamingApi, target: str, headers: str
) -> None:
    """RFC 9110 lets a server ignore Upgrade: the request goes on as any other, its hop-by-hop headers
    dropped, and no connection is switched or held."""
    sock, answer, rest = upgrade(proxy, target, headers=headers)
    with sock:
        assert status_of(answer) == 200
        assert json.loads(read_until_closed(sock, rest))["kind"] == "Status"
    assert api.heads[-1].get("Upgrade") == [] and api.heads[-1].get("Connection") == []
    assert api.reviews == []


@pytest.mark.parametrize(
    "target", ["/api/v1/namespaces/ns/pods/%2e%2e/exec", "/api/v1/namespaces/ns/pods/web-0/exec/../../x"]
)
def test_an_upgrade_of_a_path_the_api_server_would_read_otherwise_is_refused(
    proxy: ApiProxy, api: StreamingApi, target: str
) -> None:
    """A dot segment or an escaped dot: the review would name one pod and the API server act on another."""
    sock, answer, _ = upgrade(proxy, target)
    with sock:
        assert status_of(answer) == 400
    assert api.heads == [] and api.reviews == []


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (WEBSOCKET + "Content-Length: 5\r\n", 400),  # a body would be taken for the stream's first bytes
        (WEBSOCKET + "Transfer-Encoding: chunked\r\n", 411),
        (WEBSOCKET + "X-Note: a\x00b\r\n", 400),  # control characters: written as they are, they could end
        (WEBSOCKET + "X-Note: a\x7fb\r\n", 400),  # the line the API server reads, or confuse it
    ],
)
def test_a_malformed_upgrade_request_is_refused(proxy: ApiProxy, api: StreamingApi, headers: str, status: int) -> None:
    sock, answer, _ = upgrade(proxy, headers=headers)
    with sock:
        assert status_of(answer) == status
    assert [h for h in api.heads if "/exec" in h.target] == []


def test_an_api_server_that_cannot_be_reached_for_the_upgrade_gets_502(
    api: StreamingApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review was answered, but the upgrade's own connection finds nobody listening."""
    monkeypatch.setattr(reviews, "may_i", lambda *args, **kwargs: True)
    with socket.create_server(("127.0.0.1", 0)) as spare:
        nobody = spare.getsockname()[1]
    proxy = start(api)
    proxy.kube.api.configuration.host = f"http://127.0.0.1:{nobody}"
    try:
        sock, answer, rest = upgrade(proxy)
        with sock:
            assert status_of(answer) == 502 and b"cannot reach the API server" in read_until_closed(sock, rest)
    finally:
        proxy.stop()


def chunks_with_times(sock: socket.socket, count: int, buffer: bytes = b"") -> list[tuple[float, bytes]]:
    """Read ``count`` chunks of a chunked body (the first ones maybe in ``buffer``), each with when it came."""
    got: list[tuple[float, bytes]] = []
    while len(got) < count:
        size, _, after = buffer.partition(b"\r\n")
        if _ and len(after) >= int(size, 16) + 2:
            got.append((time.monotonic(), after[: int(size, 16)]))
            buffer = after[int(size, 16) + 2 :]
            continue
        data = sock.recv(65536)
        assert data, f"the stream ended after {got}"
        buffer += data
    return got


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/namespaces/ns/configmaps?watch=true",
        "/api/v1/watch/namespaces/ns/configmaps",  # the old watch path
        "/api/v1/namespaces/ns/pods/web-0/log?follow=true&container=c",
    ],
)
def test_a_stream_outlives_the_silence_timeout_and_comes_event_by_event(
    proxy: ApiProxy, api: StreamingApi, target: str
) -> None:
    """Plain answers may pause 0.5 s here; a watch (or a followed log) quiet for 0.8 s between events goes on
    for as long as it lasts, and each event arrives when it is sent, in a chunk of its own (a client that
    reads "whatever there is" gets it then, not at the end)."""
    api.every = 0.8
    if "/watch/" in target:
        target += "?watch=true"  # what the fake streams on; the proxy knows the path alone
    started = time.monotonic()
    sock, answer, rest = send(proxy, f"GET {target} HTTP/1.1\r\nAuthorization: Bearer {token(proxy)}\r\n\r\n")
    with sock:
        assert answer.startswith(b"HTTP/1.1 200 ") and b"Transfer-Encoding: chunked" in answer
        events = chunks_with_times(sock, 4, rest)
    assert [json.loads(chunk)["number"] for _, chunk in events] == [1, 2, 3, 4]  # one event, one chunk
    assert events[-1][0] - started >= 2.2  # 3 gaps of 0.8 s: well past the 0.5 s silence timeout
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(events)]
    assert all(0.6 <= gap <= 1.5 for gap in gaps), gaps


def test_a_plain_answer_still_times_out_when_the_api_server_is_silent(proxy: ApiProxy, api: StreamingApi) -> None:
    api.delay = 2.0
    started = time.monotonic()
    sock, answer, _ = send(proxy, f"GET /api/v1/namespaces HTTP/1.1\r\nAuthorization: Bearer {token(proxy)}\r\n\r\n")
    with sock:
        assert status_of(answer) == 502
    assert time.monotonic() - started < 1.5


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=120),
    st.lists(st.tuples(st.sampled_from(["Upgrade", "Connection", "X"]), st.text(max_size=40)), max_size=4),
)
def test_classifying_a_request_never_raises(path: str, pairs: list[tuple[str, str]]) -> None:
    from email.message import Message

    headers = Message()
    for key, value in pairs:
        headers[key] = value
    found = streaming.upgrade_of(path, headers)
    assert found is None or (found.subresource in ("exec", "attach", "portforward") and "%" not in found.pod)
    assert streaming.streamed("GET", path) in (True, False)
