"""JSON from the API server, decoded without a recursion limit.

Called by ``client`` for every response body and every watch event. The standard library's decoder
recurses once per nesting level and raises ``RecursionError`` near 1,000 levels, but the API server
stores custom resources nested far deeper (a spec 5,000 levels deep is accepted). One such object in a
list page would make the whole page, and so the whole kind, undecodable forever. The fast C decoder
handles every ordinary body; only when it gives up on depth does this module's iterative decoder take
over, with the same result for the same text. What to do with a deep object is the reconciler's call
(it refuses it on that object alone); here it only has to arrive.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


def loads(data: bytes | str) -> Any:
    """``json.loads``, but any nesting depth decodes."""
    text = data.decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data
    try:
        return json.loads(text)
    except RecursionError:
        return _loads_iteratively(text)


_Frame = tuple[dict[str, Any] | list[Any], str | None]  # a container being filled, and a dict's pending key


def _loads_iteratively(text: str) -> Any:
    """A stack-based JSON decoder: containers are pushed, never recursed into."""
    stack: list[_Frame] = []
    pos = _skip(text, 0)
    while True:
        if pos >= len(text):
            raise json.JSONDecodeError("unexpected end of data", text, pos)
        opened, value, pos = _open_or_scalar(text, pos)
        if opened is not None:
            stack.append(opened)
            continue
        finished, pos = _attach(text, pos, value, stack)
        if finished is None:
            continue
        end = _skip(text, pos)
        if end != len(text):
            raise json.JSONDecodeError("extra data", text, end)
        return finished[0]


def _open_or_scalar(text: str, pos: int) -> tuple[_Frame | None, Any, int]:
    """At a value: a non-empty container to push, or a finished value (scalar or empty container)."""
    char = text[pos]
    if char in "{[":
        container: dict[str, Any] | list[Any] = {} if char == "{" else []
        pos = _skip(text, pos + 1)
        if text[pos : pos + 1] == ("}" if char == "{" else "]"):
            return None, container, pos + 1
        key = None
        if char == "{":
            key, pos = _key(text, pos)
        return (container, key), None, pos
    if char == '"':
        string, pos = scanstring(text, pos + 1)
        return None, string, pos
    scalar, pos = _scalar(text, pos)
    return None, scalar, pos


def _attach(text: str, pos: int, value: Any, stack: list[_Frame]) -> tuple[tuple[Any] | None, int]:
    """Put a finished value into its container and close every container that ends right after it.

    Returns ``((document,), pos)`` once the outermost value is complete, else ``(None, pos of the next value)``.
    """
    while stack:
        container, key = stack[-1]
        if isinstance(container, dict):
            container[key] = value  # type: ignore[index]
        else:
            container.append(value)
        pos = _skip(text, pos)
        closing = "}" if isinstance(container, dict) else "]"
        sep = text[pos : pos + 1]
        if sep == ",":
            pos = _skip(text, pos + 1)
            if isinstance(container, dict):
                key, pos = _key(text, pos)
                stack[-1] = (container, key)
            return None, pos
        if sep != closing:
            raise json.JSONDecodeError(f"expected ',' or '{closing}'", text, pos)
        stack.pop()
        value, pos = container, pos + 1
    return (value,), pos


def _skip(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()  # type: ignore[union-attr]


def _key(text: str, pos: int) -> tuple[str, int]:
    """A dict key and the ':' after it; returns the position of the value."""
    if text[pos : pos + 1] != '"':
        raise json.JSONDecodeError("expected a string key", text, pos)
    key, pos = scanstring(text, pos + 1)
    pos = _skip(text, pos)
    if text[pos : pos + 1] != ":":
        raise json.JSONDecodeError("expected ':'", text, pos)
    return key, _skip(text, pos + 1)


def _scalar(text: str, pos: int) -> tuple[Any, int]:
    for word, value in _LITERALS.items():
        if text.startswith(word, pos):
            return value, pos + len(word)
    match = _NUMBER.match(text, pos)
    if not match or match.end() == pos:
        raise json.JSONDecodeError("expected a value", text, pos)
    number = match.group(0)
    if match.group(1) or match.group(2):
        return float(number), match.end()
    return int(number), match.end()
