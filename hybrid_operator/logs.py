"""Log lines a person can read, or JSON a log pipeline can parse (``--log-format``).

Set up once by ``cli``. Structured fields come from three places, later ones winning: the fields
``bind`` put on the current thread (the reactor binds kind, namespace, name and run id around each
reconcile, so every line about an object carries them, whoever logs it), any ``extra={...}`` keys, and
``extra={"fields": {...}}``. They come out as ``key=value`` pairs after the message (text) or as
top-level keys (json). Secrets never reach a log
line: nothing logs extra vars or environments, and failed task output comes from Ansible, which
honours ``no_log``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_BOUND: ContextVar[dict[str, Any]] = ContextVar("hybrid_operator_log_fields", default={})  # noqa: B039
# Attributes every LogRecord has: anything else on a record came from ``extra``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "fields", "taskName"}


@contextmanager
def bind(**values: Any) -> Iterator[None]:
    """Put fields on every log line of this thread inside the block (None values are left out)."""
    token = _BOUND.set({**_BOUND.get(), **{k: v for k, v in values.items() if v is not None}})
    try:
        yield
    finally:
        _BOUND.reset(token)


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of a record: bound ones, then ``extra`` keys, then ``extra["fields"]``."""
    out = dict(_BOUND.get())
    out.update({k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")})
    out.update(getattr(record, "fields", None) or {})
    return out


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = f"{stamp}.{int(record.msecs):03d}Z {record.levelname:<7} {record.name}: {record.getMessage()}"
        fields = record_fields(record)
        if fields:
            line += " " + " ".join(f"{k}={_quote(v)}" for k, v in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        data.update(record_fields(record))
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def _quote(value: object) -> str:
    text = str(value)
    return json.dumps(text) if (not text or any(c in text for c in ' "=')) else text


def setup(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
