"""The workers: what becomes of a key after its reconcile (requeued, retried, forgotten, reported), the ring's
say with --sharding, and the /healthz check. A fake queue records what is enqueued; the reconciler, the
kinds and the ring are fakes too, so no object is ever really reconciled."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hybrid_operator.errors import InvalidObject, PermanentError, TemporaryError
from hybrid_operator.kube.client import ApiError
from hybrid_operator.reactor import heap
from hybrid_operator.reactor import workers as workers_mod
from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, PRIORITY_RESYNC, Key
from hybrid_operator.reactor.reconciling import Outcome
from hybrid_operator.reactor.sharding.rules import Verdict
from hybrid_operator.reactor.workers import Workers
from tests.helpers import wait_until

GVK = "Memcached.v1alpha1.cache.example.com"
KEY = Key(GVK, "ns", "mc")
CTX: Any = object()  # the kind's context: only passed through


class FakeQueue:
    """Hands out ``keys`` once each, then sets ``stop``; records everything done to it."""

    def __init__(self, stop: threading.Event, keys: list[Key]) -> None:
        self.stop, self.keys = stop, list(keys)
        self.calls: list[tuple[Any, ...]] = []
        self.get_error: Exception | None = None

    def get(self, timeout: float | None = None) -> Key | None:
        if self.get_error is not None:
            raise self.get_error
        if self.keys:
            return self.keys.pop(0)
        self.stop.set()
        return None

    def done(self, key: Key) -> None:
        self.calls.append(("done", key))

    def forget(self, key: Key) -> None:
        self.calls.append(("forget", key))

    def add(self, key: Key, *, delay: float = 0.0, priority: int = PRIORITY_CHANGE) -> None:
        self.calls.append(("add", key, delay, priority))

    def add_rate_limited(self, key: Key, at_least: float = 0.0) -> float:
        self.calls.append(("add_rate_limited", key, at_least))
        return max(1.0, at_least)

    def processing(self) -> int:
        return 0

    def depth(self) -> int:
        return len(self.keys)


class FakeReconciler:
    def __init__(self, answer: Outcome | Exception | Callable[[], Outcome]) -> None:
        self.answer = answer
        self.reconciled: list[Key] = []
        self.reports: list[tuple[Key, str, str]] = []

    def reconcile(self, key: Key, ctx: Any) -> Outcome:
        assert ctx is CTX
        self.reconciled.append(key)
        if isinstance(self.answer, Exception):
            raise self.answer
        if callable(self.answer):
            return self.answer()
        return self.answer

    def report(self, key: Key, ctx: Any, reason: str, message: str) -> None:
        self.reports.append((key, reason, message))

    def tidy(self) -> None:
        self.tidied = True


class FakeKind:
    def __init__(self, uids: dict[tuple[str, str], str]) -> None:
        self.ctx, self.uids = CTX, uids

    def uid(self, namespace: str, name: str) -> str | None:
        return self.uids.get((namespace, name))


class FakeKinds:
    def __init__(self, uids: dict[tuple[str, str], str] | None = None) -> None:
        self.by_gvk = {GVK: FakeKind(uids if uids is not None else {("ns", "mc"): "uid-1"})}

    def get(self, gvk: str) -> FakeKind | None:
        return self.by_gvk.get(gvk)


class FakeRing:
    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.begun: list[tuple[Key, str]] = []
        self.ended: list[Key] = []

    def begin(self, key: Key, uid: str) -> Verdict:
        self.begun.append((key, uid))
        return self.verdict

    def end(self, key: Key) -> None:
        self.ended.append(key)


class Setup:
    def __init__(
        self,
        answer: Outcome | Exception | Callable[[], Outcome],
        *,
        ring: FakeRing | None = None,
        kinds: FakeKinds | None = None,
        stuck_after: float = 600.0,
    ) -> None:
        self.stop = threading.Event()
        self.queue = FakeQueue(self.stop, [KEY])
        self.reconciler = FakeReconciler(answer)
        self.ring = ring
        self.workers = Workers(
            1,
            self.queue,  # type: ignore[arg-type]
            kinds or FakeKinds(),  # type: ignore[arg-type]
            self.reconciler,  # type: ignore[arg-type]
            self.stop,
            lambda: self.ring,  # type: ignore[arg-type,return-value]
            stuck_after=stuck_after,
        )

    def work(self) -> list[tuple[Any, ...]]:
        """One worker's loop until the queue ran dry: what it did to the queue."""
        self.workers._work()
        return self.queue.calls


# -- after a reconcile ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "calls"),
    [
        (Outcome(succeeded=True), [("forget", KEY)]),
        (Outcome(succeeded=True, requeue_after=30.0), [("forget", KEY), ("add", KEY, 30.0, PRIORITY_RESYNC)]),
        (Outcome(succeeded=True, requeue_after=0), [("forget", KEY), ("add", KEY, 0, PRIORITY_CHANGE)]),
        (Outcome(succeeded=False, retry=True), [("add_rate_limited", KEY, 0.0)]),
        (Outcome(succeeded=False, refused="InvalidSpec"), []),  # back only when the object changes
    ],
    ids=["done", "periodic", "at-once", "retry", "refused"],
)
def test_an_outcome_decides_when_the_key_comes_back(outcome: Outcome, calls: list[tuple[Any, ...]]) -> None:
    setup = Setup(outcome)
    assert setup.work() == [*calls, ("done", KEY)]
    assert setup.reconciler.reconciled == [KEY]


def test_a_failure_keeps_its_backoff_count() -> None:
    setup = Setup(Outcome(succeeded=False, retry=True, requeue_after=5.0))
    calls = setup.work()
    assert ("forget", KEY) not in calls
    assert not any(c[0] == "add" for c in calls)  # the backoff decides, not requeue_after


# -- after an error ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "calls"),
    [
        (ApiError(409, "Conflict"), [("add", KEY, 0.0, PRIORITY_RESYNC)]),
        (ApiError(503, "Unavailable", retry_after=7.0), [("add_rate_limited", KEY, 7.0)]),
        (ApiError(429, "Too Many Requests"), [("add_rate_limited", KEY, 0.0)]),
        (ApiError(401, "Unauthorized"), [("add_rate_limited", KEY, 0.0)]),
        (TemporaryError("status kept conflicting", delay=5.0), [("add_rate_limited", KEY, 5.0)]),
        (RuntimeError("a bug"), [("add_rate_limited", KEY, 0.0)]),
    ],
    ids=["conflict", "retry-after", "throttled", "token", "temporary", "bug"],
)
def test_an_error_is_retried_as_judged(error: Exception, calls: list[tuple[Any, ...]]) -> None:
    setup = Setup(error)
    assert setup.work() == [*calls, ("done", KEY)]
    assert setup.reconciler.reports == []


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ApiError(403, "Forbidden"), "Forbidden"),
        (ApiError(422, "Unprocessable Entity"), "Invalid"),
        (ApiError(400, "Bad Request"), "ApiError400"),
        (PermanentError("cannot ever work"), "PermanentError"),
        (InvalidObject("InvalidSpec", "bad"), "PermanentError"),
    ],
)
def test_an_error_that_will_repeat_is_reported_on_the_object_not_retried(error: Exception, reason: str) -> None:
    setup = Setup(error)
    assert setup.work() == [("done", KEY)]
    assert setup.reconciler.reports == [(KEY, reason, str(error))]


def test_a_bug_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    setup = Setup(RuntimeError("a bug"))
    with caplog.at_level(logging.INFO, logger="hybrid_operator.reactor.workers"):
        setup.work()
    [record] = [r for r in caplog.records if r.exc_info]
    assert "crashed" in record.getMessage()
    assert str(KEY) in record.getMessage()


def test_a_run_cut_short_by_the_stop_is_no_crash(caplog: pytest.LogCaptureFixture) -> None:
    """At the stop's deadline the executor closes under the runs still going: their error is the stop's, not a
    bug, and nothing is requeued."""

    def cut_short() -> Outcome:
        setup.stop.set()
        raise RuntimeError("the executor is closed")

    setup = Setup(cut_short)
    with caplog.at_level(logging.INFO, logger="hybrid_operator.reactor.workers"):
        assert setup.work() == [("done", KEY)]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING]
    assert f"reconcile of {KEY} cut short by the stop: the executor is closed" in caplog.text


def test_a_temporary_error_is_logged_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    setup = Setup(ApiError(503, "Unavailable"))
    with caplog.at_level(logging.INFO, logger="hybrid_operator.reactor.workers"):
        setup.work()
    assert not any(r.exc_info for r in caplog.records)
    assert any("retrying" in r.getMessage() for r in caplog.records)


def test_several_keys_are_each_handled() -> None:
    other = Key(GVK, "ns", "other")
    setup = Setup(Outcome(succeeded=True))
    setup.queue.keys = [KEY, other]
    setup.work()
    assert setup.reconciler.reconciled == [KEY, other]
    assert [c for c in setup.queue.calls if c[0] == "done"] == [("done", KEY), ("done", other)]


# -- the ring's say (--sharding) -----------------------------------------------------------------------


def test_a_key_the_ring_runs_is_reconciled_and_ended() -> None:
    ring = FakeRing(Verdict.RUN)
    setup = Setup(Outcome(succeeded=True), ring=ring)
    assert setup.work() == [("forget", KEY), ("done", KEY)]
    assert ring.begun == [(KEY, "uid-1")]
    assert ring.ended == [KEY]
    assert setup.reconciler.reconciled == [KEY]


def test_a_key_the_ring_runs_is_ended_even_when_its_reconcile_raises() -> None:
    ring = FakeRing(Verdict.RUN)
    setup = Setup(ApiError(503, "Unavailable"), ring=ring)
    setup.work()
    assert ring.ended == [KEY]


def test_a_key_the_ring_drops_is_forgotten_without_a_run() -> None:
    ring = FakeRing(Verdict.DROP)
    setup = Setup(Outcome(succeeded=True), ring=ring)
    assert setup.work() == [("forget", KEY), ("done", KEY)]
    assert setup.reconciler.reconciled == []
    assert ring.ended == []  # never begun, so never ended


def test_a_key_the_ring_parks_is_skipped_and_keeps_its_backoff() -> None:
    ring = FakeRing(Verdict.WAIT)
    setup = Setup(Outcome(succeeded=True), ring=ring)
    assert setup.work() == [("done", KEY)]
    assert setup.reconciler.reconciled == []
    assert ring.ended == []


def test_a_key_gone_from_the_cache_is_not_offered_to_the_ring() -> None:
    ring = FakeRing(Verdict.RUN)
    setup = Setup(Outcome(succeeded=True), ring=ring, kinds=FakeKinds({}))
    assert setup.work() == [("done", KEY)]
    assert ring.begun == []
    assert setup.reconciler.reconciled == []


# -- alive(): the /healthz check -----------------------------------------------------------------------


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the death is the point
def test_a_worker_that_died_fails_the_check() -> None:
    setup = Setup(Outcome(succeeded=True))
    setup.queue.get_error = RuntimeError("queue broke")
    setup.workers.start()
    wait_until(lambda: not setup.workers.threads[0].is_alive(), 5)
    ok, detail = setup.workers.alive()
    assert not ok
    assert detail == "workers died: worker-0"


def test_workers_that_ended_because_of_stop_pass_the_check() -> None:
    setup = Setup(Outcome(succeeded=True))
    setup.workers.start()
    assert setup.workers.join(time.monotonic() + 5)
    assert setup.stop.is_set()
    assert setup.workers.alive()[0]


def test_a_worker_stuck_in_one_reconcile_fails_the_check(release: threading.Event) -> None:
    started = threading.Event()

    def hang() -> Outcome:
        started.set()
        release.wait(10)
        return Outcome(succeeded=True)

    setup = Setup(hang, stuck_after=0.05)
    setup.workers.start()
    assert started.wait(5)
    time.sleep(0.1)
    ok, detail = setup.workers.alive()
    assert not ok
    assert detail.startswith("workers stuck for over 0s: worker-0")
    release.set()
    assert setup.workers.join(time.monotonic() + 5)
    assert setup.workers.alive()[0]  # no longer busy


def test_a_busy_worker_within_its_time_passes_the_check(release: threading.Event) -> None:
    started = threading.Event()

    def busy() -> Outcome:
        started.set()
        release.wait(10)
        return Outcome(succeeded=True)

    setup = Setup(busy, stuck_after=600.0)
    setup.workers.start()
    assert started.wait(5)
    ok, detail = setup.workers.alive()
    assert ok
    assert detail.startswith("1 workers")
    release.set()
    assert setup.workers.join(time.monotonic() + 5)


# -- idle chores -------------------------------------------------------------------------------------------


def test_an_idle_worker_tidies_and_trims_the_heap_once_after_work(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[bool] = []
    monkeypatch.setattr(workers_mod.heap, "trim", lambda: trims.append(True) or True)
    setup = Setup(Outcome(succeeded=True))
    setup.workers.trim_after = 0.0
    setup.work()  # one run, then the queue is idle
    assert trims == [True] and getattr(setup.reconciler, "tidied", False)
    setup.stop.clear()
    setup.work()  # idle again with no run since: no second trim
    assert trims == [True]


def test_the_heap_trim_never_raises() -> None:
    assert heap.trim() in (True, False)
