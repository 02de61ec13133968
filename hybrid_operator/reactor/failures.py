"""What an error during a reconcile means for the object: the one place that decides.

Called by ``orchestration`` for every exception a reconcile raises (the reconciler handles the outcomes
of runs itself). Modelled on controller-runtime and kopf: a conflict is re-read and retried at once; a
throttled, timed-out, unreachable or failing API server is retried with backoff, no sooner than its
Retry-After; any other 4xx on our own write (forbidden, invalid) will fail the same way until the object
changes, so it is reported on the object and not retried; ``TemporaryError(delay)`` and
``PermanentError`` say so themselves; anything else is a bug, retried with backoff and logged with its
traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hybrid_operator.errors import PermanentError, TemporaryError
from hybrid_operator.kube.client import ApiError


class Retry(Enum):
    NOW = "now"  # re-read and run again, no backoff (a write conflict)
    BACKOFF = "backoff"  # per-object exponential backoff, at least ``delay``
    NEVER = "never"  # report on the object; wait for it to change


@dataclass(frozen=True)
class Verdict:
    retry: Retry
    delay: float = 0.0  # the least wait before the next try
    reason: str = ""  # CamelCase reason for the object's Failure condition and Event (NEVER only)
    bug: bool = False  # not one of our errors: log the traceback


def judge(exc: BaseException) -> Verdict:
    """The verdict for an exception raised by a reconcile."""
    if isinstance(exc, ApiError):
        return _api(exc)
    if isinstance(exc, PermanentError):
        return Verdict(Retry.NEVER, reason="PermanentError")
    if isinstance(exc, TemporaryError):
        return Verdict(Retry.BACKOFF, delay=exc.delay or 0.0)
    return Verdict(Retry.BACKOFF, bug=True)


def _api(exc: ApiError) -> Verdict:
    if exc.conflict:
        return Verdict(Retry.NOW)
    if exc.transient or exc.status == 401:  # 401: our own token expired or rotates; it comes back
        return Verdict(Retry.BACKOFF, delay=exc.retry_after or 0.0)
    if exc.status == 403:
        return Verdict(Retry.NEVER, reason="Forbidden")
    if exc.status == 422:
        return Verdict(Retry.NEVER, reason="Invalid")
    return Verdict(Retry.NEVER, reason=f"ApiError{exc.status}")
