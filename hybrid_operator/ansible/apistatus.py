"""The API server's refusal in a failed task's message, read into one line that names the fields.

Called by ``results`` for every failed task, so the ``Failure`` condition, the Warning Event and the log
line say what the API server said. kubernetes.core's modules fail with its answer pasted into their
message whole (``Failed to create object: {"kind":"Status",...,"code":422}``, or the same as a bytes
literal ``b'{...}'``): several hundred characters of JSON in which the useful part, for a 422 Invalid,
is ``details.causes``, each a ``field`` and a ``message``. That becomes::

    Failed to create object: Deployment.apps "web" is invalid: spec.replicas: Invalid value: -1: must be
    greater than or equal to 0

Bounded: at most ``MAX_CAUSES`` causes (then how many more), each cause's message at most ``MAX_CAUSE``
characters, the text searched at most ``MAX_TEXT``. Any other text, and any other Status code, is left as
it was: a 403 or a 404 already reads well in the Status ``message`` the module shows.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

MAX_CAUSES = 5
MAX_CAUSE = 200
MAX_TEXT = 64 * 1024  # a Status with every cause of a large object fits; longer text is not searched
_STATUS = re.compile(r'\{\s*"kind"\s*:\s*"Status"')
MAX_VALUE = 40  # an echoed "Invalid value" longer than this is elided, so the reason after it is kept
# A validator's message: "Invalid value: " and the value it refused (a quoted Go string, or a bare token),
# then ": " and why. The value can be the whole object a patch sent (a 422 from decoding a patch).
_INVALID_VALUE = re.compile(r'(?P<head>Invalid value: )(?P<value>"(?:[^"\\]|\\.)*"|[^:"]*)(?P<rest>: .*)?\Z', re.DOTALL)
_BYTES_LITERAL = re.compile(r"""b(['"])(?P<body>.*?(?<!\\)(?:\\\\)*)\1""", re.DOTALL)


def invalid_message(text: str) -> str | None:
    """One line for the 422 Status in ``text`` (with the words before it), or None when there is none."""
    if len(text) > MAX_TEXT:
        return None
    found = _find_status(text)
    if found is None:
        return None
    before, status = found
    if status.get("code") != 422:
        return None
    found_details = status.get("details")
    details: dict[str, Any] = found_details if isinstance(found_details, dict) else {}
    causes = [c for c in details.get("causes") or [] if isinstance(c, dict)]
    parts = [_cause(cause) for cause in causes[:MAX_CAUSES]]
    if len(causes) > MAX_CAUSES:
        parts.append(f"and {len(causes) - MAX_CAUSES} more")
    if not parts:  # a 422 without causes: its own message
        parts = [_bounded(str(status.get("message") or "Invalid"), MAX_CAUSE * 2)]
    what = _object(details)
    line = (f"{what} is invalid: " if what else "") + "; ".join(parts)
    prefix = before.rstrip(" :'\"\n\t")
    return f"{prefix}: {line}" if prefix else line


def _find_status(text: str) -> tuple[str, dict[str, Any]] | None:
    """The first Status object in ``text`` (also inside a bytes literal), with the text before it."""
    decoder = json.JSONDecoder()
    for candidate, offset in _candidates(text):
        for match in _STATUS.finditer(candidate):
            try:
                value, _end = decoder.raw_decode(candidate, match.start())
            except ValueError:
                continue
            if isinstance(value, dict):
                return text[: offset if offset >= 0 else match.start()], value
    return None


def _candidates(text: str) -> list[tuple[str, int]]:
    """Each bytes literal's text, decoded as Python would, with where the literal starts (first: read
    as plain text, its escapes would be doubled); then the text itself (offset -1: the Status's own
    position)."""
    found = []
    for match in _BYTES_LITERAL.finditer(text):
        try:
            value = ast.literal_eval(match.group(0))
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, bytes):
            found.append((value.decode("utf-8", "replace"), match.start()))
    return [*found, (text, -1)]


def _cause(cause: dict[str, Any]) -> str:
    field = str(cause.get("field") or "").strip()
    message = _bounded(_elide_value(str(cause.get("message") or cause.get("reason") or "invalid").strip()), MAX_CAUSE)
    if field and message.startswith(f"{field}:"):  # some validators repeat the field in the message
        return message
    return f"{field}: {message}" if field else message


def _elide_value(message: str) -> str:
    """``Invalid value: "<the whole patch>": json: cannot unmarshal ...`` -> the value cut short, the reason kept."""
    match = _INVALID_VALUE.search(message)
    if match is None or len(match.group("value")) <= MAX_VALUE:
        return message
    value = match.group("value")
    short = value[: MAX_VALUE - 4] + ('..."' if value.startswith('"') else "...")
    return message[: match.start()] + match.group("head") + short + (match.group("rest") or "")


def _object(details: dict[str, Any]) -> str:
    kind, group, name = (str(details.get(key) or "") for key in ("kind", "group", "name"))
    if not kind:
        return ""
    what = f"{kind}.{group}" if group else kind
    return f'{what} "{name}"' if name else what


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
