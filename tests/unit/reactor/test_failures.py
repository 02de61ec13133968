"""The error model: each class of error, one verdict (retry now, back off, or report and wait)."""

from __future__ import annotations

import pytest

from hybrid_operator.errors import InvalidObject, PermanentError, TemporaryError
from hybrid_operator.kube.client import ApiError, _retry_after
from hybrid_operator.reactor.failures import Retry, judge
from hybrid_operator.reactor.queueing import Key, WorkQueue


def test_a_conflict_is_rerun_at_once_on_fresh_state() -> None:
    assert judge(ApiError(409, "Conflict")).retry is Retry.NOW


@pytest.mark.parametrize("status", [0, 401, 408, 429, 500, 502, 503, 504])
def test_throttling_timeouts_and_server_errors_back_off(status: int) -> None:
    verdict = judge(ApiError(status, "x"))
    assert verdict.retry is Retry.BACKOFF and not verdict.bug


def test_retry_after_is_honoured() -> None:
    assert judge(ApiError(429, "Too Many Requests", retry_after=7)).delay == 7
    assert _retry_after("12") == 12 and _retry_after(" 99999 ") == 3600
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None and _retry_after(None) is None


@pytest.mark.parametrize(("status", "reason"), [(403, "Forbidden"), (422, "Invalid"), (400, "ApiError400")])
def test_other_client_errors_are_reported_and_not_retried(status: int, reason: str) -> None:
    verdict = judge(ApiError(status, "x"))
    assert (verdict.retry, verdict.reason) == (Retry.NEVER, reason)


def test_our_own_errors_say_what_they_are() -> None:
    assert judge(TemporaryError("later", delay=30)).delay == 30
    assert judge(TemporaryError("later")).retry is Retry.BACKOFF
    assert judge(PermanentError("no")).retry is Retry.NEVER
    assert judge(InvalidObject("InvalidSpec", "no")).retry is Retry.NEVER


def test_anything_else_is_a_bug_retried_with_backoff() -> None:
    verdict = judge(KeyError("metadata"))
    assert verdict.retry is Retry.BACKOFF and verdict.bug


def test_backoff_waits_at_least_what_the_server_asked() -> None:
    queue = WorkQueue(global_limit=1, per_kind_limits={}, backoff_base=1.0, backoff_cap=300.0)
    key = Key("Foo.v1.x", "ns", "a")
    assert queue.add_rate_limited(key, at_least=20) == 20
    assert queue.add_rate_limited(key) == 2
    assert queue.add_rate_limited(key, at_least=10_000) == 300
