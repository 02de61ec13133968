"""The operator's own error hierarchy.

Every layer raises one of these so the reactor can decide, without knowing who failed, whether to retry
with backoff (``TemporaryError``), give up until the object changes (``PermanentError``) or refuse to start
(``ConfigError``: a bad watches.yaml or flag, reported once at start-up with the entry and field named).
"""

from __future__ import annotations


class OperatorError(Exception):
    """Base class of every error the operator raises on purpose."""


class ConfigError(OperatorError):
    """Bad configuration (watches.yaml, flags, environment): the operator refuses to start."""


class TemporaryError(OperatorError):
    """Worth retrying: the reactor requeues the object with backoff (or after ``delay`` seconds)."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(OperatorError):
    """Retrying will not help until the object changes: reported on the object, not retried."""


class InvalidObject(PermanentError):
    """The object itself cannot be run (a reserved spec name, an annotation out of bounds, too deep).

    ``reason`` is the CamelCase reason of its Failure condition and Warning Event; ``message`` names
    each offending field as the user wrote it. No run, and no retry until the object changes.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
