"""What the run proxy accepts from a connection, checked before anything is forwarded.

Called by ``server`` for every request. The proxy listens on loopback, so any local process can talk to
it; whatever it sends must be answered with a status code, never a traceback, a hang or a request to a
host of the sender's choosing. Only origin-form targets (``/api/...``) are taken: an absolute or
``@host:port`` target would make the forwarded URL point elsewhere. Headers must be ASCII, a body has an
exact, bounded ``Content-Length`` (no chunked uploads: Kubernetes clients never send them), and the token
is a plain bearer token.
"""

from __future__ import annotations

import json
import re
from email.message import Message
from http.server import BaseHTTPRequestHandler

MAX_BODY = 16 << 20  # bytes; the API server itself refuses requests over 3 MiB
_TARGET = re.compile(r"/[!$&'()*+,\-./0-9:;=@A-Z_a-z~%]*(\?[!$&'()*+,\-./0-9:;=?@A-Z_a-z~%]*)?")
_DIGITS = re.compile(r"[0-9]{1,10}")
_TOKEN = re.compile(r"[A-Za-z0-9_\-]{16,128}")


class BadRequest(Exception):
    """A request the proxy answers with ``status`` and does not forward."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 429: "TooManyRequests", 503: "ServiceUnavailable"}


def send_status(handler: BaseHTTPRequestHandler, refusal: BadRequest) -> None:
    """Answer with a Kubernetes ``Status``, as the API server refuses: a client shows its message as it
    shows the server's (``kubernetes.core`` puts it in the task's failure)."""
    body = json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": refusal.message,
            "reason": _REASONS.get(refusal.status, "BadRequest"),
            "code": refusal.status,
        }
    ).encode()
    handler.close_connection = True
    try:
        handler.send_response(refusal.status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(body)
    except OSError:
        pass  # the client hung up


def target(raw: str) -> str:
    """The request target, if it is a path on this server (origin form) and nothing else."""
    if len(raw) > 8192 or not raw.startswith("/") or raw.startswith("//") or not _TARGET.fullmatch(raw):
        raise BadRequest(400, "only origin-form request targets (/api/..., /apis/...) are accepted")
    return raw


def content_length(headers: Message) -> int:
    """The body's length: absent means none; anything but one plain bounded number is refused."""
    if headers.get("Transfer-Encoding") is not None:
        raise BadRequest(411, "chunked request bodies are not accepted; send Content-Length")
    values = headers.get_all("Content-Length") or []
    if not values:
        return 0
    raw = str(values[0])
    if len(values) > 1 or not _DIGITS.fullmatch(raw.strip()):
        raise BadRequest(400, "Content-Length must be a non-negative whole number")
    length = int(raw)
    if length > MAX_BODY:
        raise BadRequest(413, f"request bodies are limited to {MAX_BODY} bytes")
    return length


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None for anything else."""
    if not authorization or not authorization.isascii():
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not _TOKEN.fullmatch(token):
        return None
    return token
