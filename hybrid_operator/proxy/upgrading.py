"""Connection upgrades through the run proxy: a pod's exec, attach and port-forward, over WebSocket (the
``v4``/``v5.channel.k8s.io`` subprotocols, as ``kubernetes.core.k8s_exec`` and ``k8s_cp`` speak it) or
SPDY/3.1 (older kubectl).

Where it sits: ``proxy.ApiProxy``'s handler has checked the run's token and taken one of the runs' slots,
and ``streaming.upgrade_of`` named the upgrade. ``Upgrades.relay`` then

1. asks the API server whether the operator may ``create`` that subresource (a SelfSubjectAccessReview),
   because that is what an exec is. An API server before 1.35 authorizes a WebSocket exec, which starts as
   a GET, as ``get``; asking for ``create`` keeps the least privilege whatever the server's version. What the
   operator may not do gets 403 here and never reaches the API server.
2. takes a ``streaming.Stream`` of the run: a cap per run, a deadline, cut when the run ends;
3. opens a connection of its own to the API server, with the TLS settings and credentials of the operator's
   client (as every proxied request has), and sends the request with its upgrade headers;
4. on ``101 Switching Protocols`` sends the 101 to the run and copies bytes both ways until either side
   closes or the stream is cut. Any other answer (403, 404, 500...) is relayed as a normal response.

Why a connection of its own: after a 101 the connection belongs to the exec for good, and could never go
back to the shared pool. Why one thread copies both ways (``_pump``, non-blocking sockets): an OpenSSL
connection must not be read and written by two threads at once.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import logging
import re
import selectors
import socket
import ssl
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, cast
from urllib.parse import urlsplit

from hybrid_operator import httpbounds
from hybrid_operator.kube import reviews
from hybrid_operator.kube.client import ApiError, Kube
from hybrid_operator.proxy import accepting
from hybrid_operator.proxy.streaming import HOP_BY_HOP, Streams, Upgrade

log = logging.getLogger(__name__)

_BUFFER = 256 * 1024  # bytes one direction holds while the other side is slow to take them
_SLICE = 65536
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # a header name (RFC 9110)
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # control characters: CR/LF would split a header
_NOT_FORWARDED = HOP_BY_HOP | {"authorization", "host", "content-length"}


class UpstreamError(Exception):
    """The API server could not be reached or spoke no HTTP: answered 502."""


class _Raw(io.RawIOBase):
    """The upstream socket as a raw stream that, once ``stop`` is set, only gives back what is buffered."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.stop = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        return None if self.stop else self.sock.recv_into(buffer)


class _Source:
    """What ``http.client.HTTPResponse`` reads an answer from: our own reader, so that after a 101 the
    bytes it read past the head are ours to pass on."""

    def __init__(self, reader: io.BufferedReader[_Raw]) -> None:
        self.reader = reader

    def makefile(self, mode: str) -> io.BufferedReader[_Raw]:
        return self.reader


class Upgrades:
    """Relays a run's upgraded connections to the API server; ``silence``: seconds the API server may take
    to connect and answer the upgrade (once switched, only the stream's bounds apply)."""

    def __init__(self, kube: Kube, streams: Streams, *, silence: float) -> None:
        self.kube = kube
        self.streams = streams
        self.silence = silence
        self._context: ssl.SSLContext | None = None

    def relay(self, handler: httpbounds.BoundedHandler, key: str, target: str, upgrade: Upgrade) -> None:
        """Serve one upgrade request whose token ``key`` checked out; every refusal is an HTTP answer."""
        try:
            head = _forwarded_head(handler, target, upgrade)
            self._authorize(upgrade)
            with self.streams.open(key) as stream, self._connect() as upstream:
                self.streams.hold(stream, handler.connection)
                self.streams.hold(stream, upstream)
                self._exchange(handler, upstream, target, head)
                if stream.cut:
                    log.info("a run's %s of pod %s/%s was cut", upgrade.subresource, upgrade.namespace, upgrade.pod)
        except accepting.BadRequest as exc:
            _refuse(handler, exc.status, exc.message)
        except UpstreamError as exc:
            _refuse(handler, 502, str(exc))

    def _authorize(self, upgrade: Upgrade) -> None:
        try:
            allowed = reviews.may_i(
                self.kube,
                "create",
                resource="pods",
                subresource=upgrade.subresource,
                namespace=upgrade.namespace,
                name=upgrade.pod,
            )
        except ApiError as exc:
            raise accepting.BadRequest(503, f"cannot tell whether the operator may do this: {exc}") from exc
        if not allowed:
            raise accepting.BadRequest(
                403,
                f'the operator may not "create" pods/{upgrade.subresource} in namespace {upgrade.namespace}: '
                f"grant it in the operator's Role to let roles use it",
            )

    @contextlib.contextmanager
    def _connect(self) -> Iterator[socket.socket]:
        config = self.kube.api.configuration
        url = urlsplit(config.host)
        if config.proxy:
            raise UpstreamError("upgrades are not relayed through the HTTP proxy of the operator's kubeconfig")
        host = url.hostname or "localhost"
        try:
            sock = socket.create_connection((host, url.port or (443 if url.scheme == "https" else 80)), timeout=10)
        except OSError as exc:
            raise UpstreamError(f"cannot reach the API server: {exc}") from exc
        try:
            sock.settimeout(self.silence)
            if url.scheme == "https":
                name = config.assert_hostname if isinstance(config.assert_hostname, str) else None
                try:
                    sock = self._tls().wrap_socket(sock, server_hostname=config.tls_server_name or name or host)
                except (OSError, ValueError) as exc:
                    raise UpstreamError(f"no TLS connection to the API server: {exc}") from exc
            yield sock
        finally:
            sock.close()

    def _tls(self) -> ssl.SSLContext:
        """TLS as the operator's client config has it (CA, client certificate, verification), built once."""
        if self._context is None:
            config = self.kube.api.configuration
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            if config.verify_ssl:
                if config.ssl_ca_cert:
                    context.load_verify_locations(config.ssl_ca_cert)
                else:
                    context.load_default_certs()
                context.check_hostname = config.assert_hostname is not False
            else:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if config.cert_file:
                context.load_cert_chain(config.cert_file, config.key_file)
            context.set_alpn_protocols(["http/1.1"])
            self._context = context
        return self._context

    def _exchange(
        self, handler: httpbounds.BoundedHandler, upstream: socket.socket, target: str, head: list[str]
    ) -> None:
        """Send the request with the operator's credentials; relay the 101 and then the bytes, or the answer."""
        auth: dict[str, str] = {}
        self.kube.api.update_params_for_auth(auth, [], ["BearerToken"], target, handler.command, None)
        head[1:1] = [f"Host: {urlsplit(self.kube.api.configuration.host).netloc}", *_lines(auth)]
        raw = _Raw(upstream)
        reader = io.BufferedReader(raw)
        answer = http.client.HTTPResponse(cast(socket.socket, _Source(reader)), method=handler.command)
        try:
            upstream.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            answer.begin()
        except (OSError, http.client.HTTPException) as exc:
            raise UpstreamError(f"the API server did not answer the upgrade: {exc}") from exc
        if answer.status != 101:
            _relay_answer(handler, answer)
            return
        raw.stop = True
        early = bytearray()
        while chunk := reader.read1(_SLICE):  # what the API server sent right after its 101
            early += chunk
        lines = [f"HTTP/1.1 101 {answer.reason or 'Switching Protocols'}", *_lines(answer.headers.items())]
        handler.close_connection = True
        for sock in (handler.connection, upstream):
            # Bytes go out as they come, never held back for a fuller segment: with Nagle's algorithm on, a
            # small write after an unacknowledged one waits for the peer's delayed ACK (40 ms on Linux).
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            handler.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        except OSError:
            return  # the run hung up
        client, sent = handler.detach()
        _pump(client, upstream, to_upstream=sent, to_client=bytes(early))


def _lines(headers: Any) -> list[str]:
    items = headers.items() if isinstance(headers, dict) else headers
    return [f"{key}: {value}" for key, value in items]


def _forwarded_head(handler: BaseHTTPRequestHandler, target: str, upgrade: Upgrade) -> list[str]:
    """The request line and the client's headers as the API server gets them: hop-by-hop ones (and those
    ``Connection`` names) dropped, ``Connection: Upgrade`` and the protocol set. Refuses a body and any
    header that is no clean name and value, since these lines are written to the socket as they are."""
    if accepting.content_length(handler.headers):
        raise accepting.BadRequest(400, "an upgrade request carries no body")
    named = {t.strip().lower() for v in handler.headers.get_all("Connection") or [] for t in str(v).split(",")}
    lines = [f"{handler.command} {target} HTTP/1.1"]
    for key, value in handler.headers.items():
        if not _TOKEN.fullmatch(key) or _BAD_VALUE.search(value):
            raise accepting.BadRequest(400, f"header {key[:40]!r} is not a clean HTTP header")
        if key.lower() not in _NOT_FORWARDED and key.lower() not in named:
            lines.append(f"{key}: {value}")
    lines += ["Connection: Upgrade", f"Upgrade: {upgrade.protocol}"]
    return lines


def _refuse(handler: BaseHTTPRequestHandler, status: int, message: str) -> None:
    handler.close_connection = True
    with contextlib.suppress(OSError):
        handler.send_error(status, message)


def _relay_answer(handler: BaseHTTPRequestHandler, answer: http.client.HTTPResponse) -> None:
    """The API server refused to switch (403, 404, 500 ...): its answer, as a plain response that ends with
    the connection."""
    handler.close_connection = True
    try:
        handler.send_response(answer.status, answer.reason)
        for key, value in answer.headers.items():
            if key.lower() not in HOP_BY_HOP | {"content-length"}:
                handler.send_header(key, value)
        handler.send_header("Connection", "close")
        handler.end_headers()
        while chunk := answer.read1(_SLICE):
            handler.wfile.write(chunk)
    except (OSError, http.client.HTTPException):
        return  # either side went away: nothing left to tell anyone


class _Direction:
    """Bytes on their way from ``source`` to ``sink``."""

    def __init__(self, source: socket.socket, sink: socket.socket, first: bytes) -> None:
        self.source, self.sink = source, sink
        self.pending = bytearray(first)
        self.ended = False  # the source said end-of-file (or failed): what is pending still goes out

    def read(self) -> bool:
        """Take what the source has; False when it failed."""
        try:
            data = self.source.recv(_SLICE)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
            return True  # a TLS record not complete yet, or no application data in it
        except OSError:
            self.ended = True
            return False
        if not data:
            self.ended = True
        self.pending += data
        return True

    def write(self) -> bool:
        """Give the sink what it takes now; False when it failed."""
        try:
            sent = self.sink.send(self.pending[:_SLICE])
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        del self.pending[:sent]
        return True


def _pump(client: socket.socket, upstream: socket.socket, *, to_upstream: bytes, to_client: bytes) -> None:
    """Copy bytes both ways until one side ends and what it sent is delivered, or a side fails, or the
    stream is cut (its sockets shut down: both then read end-of-file)."""
    ways = (_Direction(client, upstream, to_upstream), _Direction(upstream, client, to_client))
    for sock in (client, upstream):
        sock.setblocking(False)
    with selectors.DefaultSelector() as selector:
        while not any(way.ended and not way.pending for way in ways):
            wanted = _register(selector, ways)
            # TLS may hold decrypted bytes the socket no longer shows as readable: take those at once
            buffered = isinstance(upstream, ssl.SSLSocket) and upstream.pending() > 0
            ready: dict[Any, int] = {key.fileobj: mask for key, mask in selector.select(0 if buffered else None)}
            if buffered:
                ready[upstream] = ready.get(upstream, 0) | selectors.EVENT_READ
            for way in ways:
                readable = ready.get(way.source, 0) & wanted[way.source] & selectors.EVENT_READ
                if readable and not way.read():
                    return
                if ready.get(way.sink, 0) & selectors.EVENT_WRITE and way.pending and not way.write():
                    return


def _register(selector: selectors.BaseSelector, ways: tuple[_Direction, _Direction]) -> dict[socket.socket, int]:
    """Ask the selector for what each socket must do next: read while its direction has room, write while
    the other direction has bytes for it. Returns those events by socket."""
    wanted: dict[socket.socket, int] = {ways[0].source: 0, ways[1].source: 0}
    for way in ways:
        if not way.ended and len(way.pending) < _BUFFER:
            wanted[way.source] |= selectors.EVENT_READ
        if way.pending:
            wanted[way.sink] |= selectors.EVENT_WRITE
    for sock, events in wanted.items():
        registered = selector.get_map().get(sock)
        if registered is None:
            if events:
                selector.register(sock, events)
        elif not events:
            selector.unregister(sock)
        elif registered.events != events:
            selector.modify(sock, events)
    return wanted
