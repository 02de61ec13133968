"""The metrics the alerts and the dashboard need, set where the state is known: the queue's failing objects
and waits, the caps, the probes' checks on every scrape, the warm executor switching off, the artifacts'
bytes against their budget, and a failed run's reason as a short label."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import pytest

from hybrid_operator import metrics
from hybrid_operator.ansible.artifacts import ArtifactStore, dir_size
from hybrid_operator.ansible.results import RunResult
from hybrid_operator.ansible.warm.executor import WarmExecutor
from hybrid_operator.metrics import REGISTRY
from hybrid_operator.reactor.queueing import Key, WorkQueue
from hybrid_operator.reactor.status import metric_reason
from hybrid_operator.serving import health

pytestmark = pytest.mark.timeout(30)

KIND = "Gauge.v1.metrics.example.com"  # a kind of its own: the registry is shared by every test


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_queue_counts_failing_objects_and_since_when_the_oldest_fails() -> None:
    clock, wall = Clock(100.0), Clock(1_700_000_000.0)
    queue = WorkQueue(global_limit=4, per_kind_limits={KIND: 3}, clock=clock, wall_clock=wall)
    assert sample("hybrid_operator_max_concurrent_reconciles", GVK=KIND) == 3
    first, second = Key(KIND, "ns", "a"), Key(KIND, "ns", "b")
    queue.add_rate_limited(first)
    wall.now += 60
    queue.add_rate_limited(second)
    queue.add_rate_limited(first)  # failing again: still failing since its first failure
    clock.now += 10
    queue.get(timeout=0)  # a gauge refresh
    assert sample("hybrid_operator_failing_objects", GVK=KIND) == 2
    assert sample("hybrid_operator_oldest_failure_timestamp_seconds", GVK=KIND) == 1_700_000_000.0
    queue.forget(first)  # it succeeded: the oldest failure is now the second's
    assert sample("hybrid_operator_failing_objects", GVK=KIND) == 1
    assert sample("hybrid_operator_oldest_failure_timestamp_seconds", GVK=KIND) == 1_700_000_060.0
    queue.discard(second)  # deleted: nothing failing, the timestamp back to 0
    assert sample("hybrid_operator_failing_objects", GVK=KIND) == 0
    assert sample("hybrid_operator_oldest_failure_timestamp_seconds", GVK=KIND) == 0


def test_the_queue_wait_counts_from_when_a_key_became_due() -> None:
    clock = Clock(100.0)
    kind = KIND + ".wait"
    queue = WorkQueue(global_limit=1, per_kind_limits={kind: 1}, clock=clock)
    before = sample("hybrid_operator_queue_wait_seconds_sum", GVK=kind) or 0.0
    queue.add(Key(kind, "ns", "late"), delay=30)  # not due yet: its wait starts in 30 s
    clock.now += 30
    queue.add(Key(kind, "ns", "now"))
    clock.now += 5
    taken = [queue.get(timeout=0), queue.get(timeout=0)]
    assert taken[1] is None  # the cap of one: the second waits on
    assert taken[0] is not None
    queue.done(taken[0])
    clock.now += 2
    assert queue.get(timeout=0) is not None
    assert sample("hybrid_operator_queue_wait_seconds_count", GVK=kind) == 2
    assert sample("hybrid_operator_queue_wait_seconds_sum", GVK=kind) == pytest.approx(before + 5 + 7)


def test_every_scrape_publishes_each_probe_check() -> None:
    probes = health.Probes()
    watches = threading.Event()
    probes.ready["watches"] = lambda: (watches.is_set(), "synced" if watches.is_set() else "kinds not served")
    probes.ready["executor"] = lambda: 1 / 0  # type: ignore[return-value]  # a broken check counts as failed
    probes.live["workers"] = lambda: (True, "moving")
    server = health.server("127.0.0.1:0", None, metrics=True, scraped=probes.publish)
    assert server is not None
    server.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        assert 'hybrid_operator_ready{check="watches"} 0.0' in text
        assert 'hybrid_operator_ready{check="executor"} 0.0' in text
        assert 'hybrid_operator_live{check="workers"} 1.0' in text
        watches.set()
        with urllib.request.urlopen(url, timeout=5) as resp:
            assert 'hybrid_operator_ready{check="watches"} 1.0' in resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()


def test_the_artifacts_bytes_and_budget_are_published(tmp_path: Path) -> None:
    """In disk blocks, as du counts them (the run dir's own and its file's)."""
    store = ArtifactStore(tmp_path / "artifacts", max_bytes=40_000)
    assert sample("hybrid_operator_artifacts_budget_bytes") == 40_000
    run_dir = store.new_run_dir(("g", "v1", "K", "ns", "n"), "run1")
    (run_dir / "stdout").write_bytes(b"x" * 4_000)
    store.finish(run_dir, keep=5)
    first = dir_size(run_dir)
    assert sample("hybrid_operator_artifacts_bytes") == first >= 4_000
    second = store.new_run_dir(("g", "v1", "K", "ns", "n"), "run2")
    # As large as the budget holds alone, in whole 4 KiB blocks (a directory takes one on ext4, none on
    # tmpfs: the sizes come from the file system the test runs on), so that with the first it is over.
    (second / "stdout").write_bytes(b"x" * ((40_000 - dir_size(second)) // 4096 * 4096))
    store.finish(second, keep=5)  # over the budget: the oldest run goes
    assert not run_dir.exists()
    assert sample("hybrid_operator_artifacts_bytes") == dir_size(second) > 40_000 - first


def test_the_warm_executor_switching_off_sets_its_gauge_to_zero() -> None:
    # Only the switch itself: a WarmExecutor without its zygote (the real one is tried in the
    # integration tests, which start one).
    executor = WarmExecutor.__new__(WarmExecutor)
    executor._lock = threading.Lock()
    executor.off, executor._closed, executor._zygote = "", False, None
    executor._decided = threading.Event()
    metrics.WARM_EXECUTOR.set(1)
    executor._switch_off("the self-test disagreed")
    assert sample("hybrid_operator_warm_executor_enabled") == 0
    assert executor.off == "the self-test disagreed"


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        (RunResult("r", rc=0), ""),
        (RunResult("r", rc=1, timed_out=True), "RunTimedOut"),
        (RunResult("r", rc=2, conditions=[{"type": "Failure", "status": "True", "reason": "NotOwned"}]), "NotOwned"),
        (RunResult("r", rc=2, conditions=[{"type": "Failure", "status": "True", "reason": "x" * 300}]), "Failed"),
        (RunResult("r", rc=2, conditions=[{"type": "Failure", "status": "True", "reason": "two words"}]), "Failed"),
        (RunResult("r", rc=2), "Failed"),
    ],
)
def test_a_failed_runs_reason_is_a_short_label(result: RunResult, reason: str) -> None:
    assert metric_reason(result) == reason
