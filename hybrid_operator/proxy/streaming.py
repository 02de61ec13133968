"""The run proxy's long-lived requests: what counts as one, how many a run may hold, and for how long.

Where it sits: ``proxy.ApiProxy``'s handler checks a run's token and takes one of the runs' slots as for any
request, then asks ``upgrade_of`` and ``streamed`` what the request is. A connection upgrade (exec, attach,
port-forward) goes to ``upgrading``; a streamed answer (``?watch=true``, a followed log) is relayed by
``relay`` here as it arrives, chunk by chunk, with no silence timeout. Both hold a ``Stream`` of ``Streams``
while they last, and register their sockets with it.

Why a registry: once established, a stream may rightly be silent for minutes (a watch with no events, an
exec waiting for its command), so no read timeout bounds it. What bounds it instead: at most
``max_per_run`` streams per run at once (429 past that), each cut after ``max_seconds``
(``--proxy-stream-timeout``, 2 minutes by default: well below the run's own timeout, so a run waiting on
a stream gives its worker back long before), and every stream of a run cut when its token is revoked
(the run ended). A cut shuts the stream's sockets down, which wakes whatever thread is blocked on them
with end-of-file.

Plain requests are registered too (``open(..., counted=False)``): they do not count against the cap, but
they have the same deadline and end with their run. So whatever a request's query says, and whatever the
API server (or a pod behind its ``proxy`` subresource, trickling a byte every few seconds) makes of it,
nothing a run started outlives the run or the deadline.
"""

from __future__ import annotations

import contextlib
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl

import urllib3

from hybrid_operator.proxy import accepting

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization"}
)
# The subresources the API server upgrades, with the plain names Kubernetes allows (no %-escapes, no dots
# alone): the authorization check must name exactly the pod the API server will act on.
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}"
_UPGRADABLE = re.compile(
    rf"^/api/v1/namespaces/(?P<ns>{_NAME})/pods/(?P<name>{_NAME})/(?P<sub>exec|attach|portforward)/?$"
)
_LOG = re.compile(rf"^/api/v1/namespaces/{_NAME}/pods/{_NAME}/log/?$")
_PROTOCOLS = {"websocket": "websocket", "spdy/3.1": "SPDY/3.1"}  # what Kubernetes clients upgrade to
_CHUNK = 16384


class TooManyStreams(accepting.BadRequest):
    """The run holds as many streams as it may: answered 429, nothing forwarded."""

    def __init__(self, limit: int) -> None:
        super().__init__(429, f"a run may hold {limit} streams (exec, attach, port-forward, watch, log) at once")


@dataclass(frozen=True)
class Upgrade:
    """A request to switch protocols on a pod's exec, attach or portforward subresource."""

    namespace: str
    pod: str
    subresource: str  # exec | attach | portforward
    protocol: str  # websocket | SPDY/3.1, as the API server spells it


def _tokens(headers: Message, name: str) -> list[str]:
    return [t.strip().lower() for value in headers.get_all(name) or [] for t in str(value).split(",") if t.strip()]


def upgrade_of(path: str, headers: Message) -> Upgrade | None:
    """The upgrade a request asks for, or None: then it is plain HTTP, its ``Upgrade`` header dropped.

    Only one protocol Kubernetes speaks (WebSocket, SPDY/3.1), named in ``Connection`` as RFC 9110 wants,
    on a pod's exec, attach or portforward: an ``Upgrade`` anywhere else is ignored, as a server may
    (``curl --http2`` sends ``Upgrade: h2c`` with ordinary requests), and the request is served as before.
    """
    protocols = _tokens(headers, "Upgrade")
    if len(protocols) != 1 or protocols[0] not in _PROTOCOLS or "upgrade" not in _tokens(headers, "Connection"):
        return None
    match = _UPGRADABLE.match(path)
    if match is None:
        return None
    return Upgrade(match["ns"], match["name"], match["sub"], _PROTOCOLS[protocols[0]])


def _on(values: list[str]) -> bool:
    """A boolean query parameter as the API server reads it (apimachinery's ``Convert_Slice_string_To_bool``):
    absent is false, and so are ``0`` and ``false`` in any case; anything else, the empty string, ``yes``,
    ``t``, ``on``, is true. The server reads the first value; any true one counts here, so a request is
    never taken for less than the server will make of it."""
    return any(value != "0" and value.lower() != "false" for value in values)


def streamed(method: str, target: str) -> bool:
    """Whether the answer to this request is a stream with no end of its own: a watch or a followed log.

    Parsed as the API server parses it (``_on``), so ``watch=yes`` is the watch the server makes of it.
    Every request is bounded anyway (see ``Streams``); this says which ones count against a run's cap.
    """
    if method != "GET":
        return False
    path, _, query = target.partition("?")
    params: dict[str, list[str]] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        params.setdefault(key, []).append(value)
    if _on(params.get("watch", [])) or "/watch/" in path:
        return True
    return _on(params.get("follow", [])) and _LOG.match(path) is not None


def socket_of(upstream: urllib3.BaseHTTPResponse) -> socket.socket | None:
    """The socket a streamed answer comes in on, for a cut to shut down (None if urllib3 hides it)."""
    sock = getattr(getattr(upstream, "connection", None), "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _cut(sock: socket.socket) -> None:
    """End-of-file for whoever reads ``sock`` and an error for whoever writes it (TLS sockets too: the
    plain socket's shutdown, so the TLS state stays whole for the thread that owns it)."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


@dataclass(eq=False)
class Stream:
    """One live stream: its run's key, when it must end, and the sockets a cut shuts down."""

    key: str
    deadline: float
    counted: bool = True  # against the run's cap: a stream, not a plain request
    sockets: list[socket.socket] = field(default_factory=list)
    cut: bool = False  # ended by its deadline or its run's end, not by either side


class Streams:
    """The live streams of every run, with their bounds; ``alive(key)`` says whether a run's token is good.
    ``max_seconds`` may be ``math.inf``: then only the run's end cuts a stream."""

    def __init__(self, alive: Callable[[str], bool], *, max_per_run: int, max_seconds: float) -> None:
        if max_per_run < 1 or max_seconds <= 0:
            raise ValueError(f"unusable stream bounds: {max_per_run} per run, {max_seconds} s")
        self.max_per_run = max_per_run
        self.max_seconds = max_seconds
        self._alive = alive
        self._live: set[Stream] = set()
        self._changed = threading.Condition()
        self._watchdog: threading.Thread | None = None
        self._stopped = False

    def sockets(self) -> list[socket.socket]:
        """The sockets every live stream holds now (for tests and debugging)."""
        with self._changed:
            return [sock for stream in self._live for sock in stream.sockets]

    def count(self, key: str | None = None, *, plain: bool = False) -> int:
        """The streams of run ``key`` (of every run if None); with ``plain``, its plain requests too."""
        with self._changed:
            return sum(1 for s in self._live if (key is None or s.key == key) and (plain or s.counted))

    @contextlib.contextmanager
    def open(self, key: str, *, counted: bool = True) -> Iterator[Stream]:
        """A stream (``counted``) or plain request for run ``key`` while the block lasts. Raises
        ``TooManyStreams``, or ``BadRequest`` (401) when the run ended since its token was checked (its
        streams were cut, this one would outlive it)."""
        with self._changed:
            if not self._alive(key):
                raise accepting.BadRequest(401, "the run this token belonged to has ended")
            if counted and sum(1 for s in self._live if s.key == key and s.counted) >= self.max_per_run:
                raise TooManyStreams(self.max_per_run)
            stream = Stream(key, time.monotonic() + self.max_seconds, counted)
            self._live.add(stream)
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="proxy-streams", daemon=True)
                self._watchdog.start()
            self._changed.notify_all()
        try:
            yield stream
        finally:
            with self._changed:  # forgotten before its sockets are closed, so a cut never hits a reused one
                self._live.discard(stream)

    def hold(self, stream: Stream, sock: socket.socket | None) -> None:
        """Cut ``sock`` with ``stream`` (at once if it was cut already). Call it before any blocking use."""
        if sock is None:
            return
        with self._changed:
            if stream.cut:
                _cut(sock)
            else:
                stream.sockets.append(sock)

    def close_run(self, key: str) -> int:
        """Cut every stream of run ``key`` (its token was revoked); how many."""
        with self._changed:
            mine = [s for s in self._live if s.key == key]
            for stream in mine:
                self._cut(stream)
            return len(mine)

    def stop(self) -> None:
        """Cut every stream and end the watchdog (the proxy stops)."""
        with self._changed:
            self._stopped = True
            for stream in self._live:
                self._cut(stream)
            self._changed.notify_all()

    def _cut(self, stream: Stream) -> None:
        stream.cut = True
        for sock in stream.sockets:
            _cut(sock)

    def _watch(self) -> None:
        """Cut each stream at its deadline: one thread for all of them, asleep until the next one is due."""
        with self._changed:
            while not self._stopped:
                now = time.monotonic()
                for stream in self._live:
                    if stream.deadline <= now and not stream.cut:
                        self._cut(stream)
                due = [s.deadline for s in self._live if not s.cut and s.deadline != math.inf]
                self._changed.wait(min(due) - now if due else None)


def relay(
    handler: BaseHTTPRequestHandler,
    upstream: urllib3.BaseHTTPResponse,
    *,
    keep: bool,
    limit: int,
    stream: Stream | None = None,
) -> bytes | None:
    """Send the API server's answer to the run as it arrives; with ``keep``, also return its plain body
    when it is at most ``limit`` bytes. A plain answer ends with the connection. A ``stream`` goes out in
    chunks of HTTP/1.1, one per piece that came: a client reading "all there is" (the Python client's
    watch, ``read(None)``) waits for the end of a body that only ends with the connection, but takes each
    chunk as it comes; and a chunked body must be HTTP/1.1's, or Go's clients read the framing as data.
    A stream cut by its bounds ends as the API server ends a watch at its timeout: cleanly."""
    seen: bytearray | None = bytearray() if keep else None
    if stream is not None:  # each event goes out at once, not held for the previous one's delayed ACK
        with contextlib.suppress(OSError):
            handler.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        _send_head(handler, upstream, stream is not None)
        for chunk in _chunks(upstream):
            handler.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if stream is not None else chunk)
            if seen is not None:
                seen += chunk
                if len(seen) > limit:
                    seen = None
        if stream is not None:
            handler.wfile.write(b"0\r\n\r\n")  # the API server ended it: so does the run's copy
    except (OSError, urllib3.exceptions.HTTPError):
        # The run hung up (a watch it no longer needs) or stopped reading, the API server went away or fell
        # silent, or the stream was cut: the answer is over, and its end is all either side can be told.
        if stream is not None and stream.cut:
            with contextlib.suppress(OSError):
                handler.wfile.write(b"0\r\n\r\n")
        return None
    finally:
        upstream.release_conn()
    if seen is None or upstream.headers.get("Content-Encoding") not in (None, "", "identity"):
        return None
    return bytes(seen)


def _send_head(handler: BaseHTTPRequestHandler, upstream: urllib3.BaseHTTPResponse, stream: bool) -> None:
    if stream:
        handler.protocol_version = "HTTP/1.1"
    handler.send_response(upstream.status)
    for key, value in upstream.headers.items():
        if key.lower() not in HOP_BY_HOP | {"content-length"}:
            handler.send_header(key, value)
    if stream:
        handler.send_header("Transfer-Encoding", "chunked")
    handler.send_header("Connection", "close")
    handler.end_headers()


def _chunks(upstream: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """The body as it arrives: each chunk of a chunked answer (a watch event, a log line) at once; of any
    other, whatever has come (``read1``), never waiting for a buffer's worth, so no event waits for the next."""
    if upstream.chunked or not hasattr(upstream, "read1"):
        yield from upstream.stream(_CHUNK, decode_content=False)
        return
    while data := upstream.read1(_CHUNK, decode_content=False):
        yield data
