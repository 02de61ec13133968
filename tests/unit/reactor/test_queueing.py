"""The work queue on a fake clock: dedupe, one worker per key, delays, caps, priorities, backoff, shutdown;
and ``Key.of``, the one way from an object to its key."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.kube.objects import GVK
from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, PRIORITY_RESYNC, Key, WorkQueue, resync_delay
from tests.fakes import FakeClock

pytestmark = pytest.mark.timeout(30)

FOO, BAR = "Foo.v1.example.com", "Bar.v1.example.com"


def key(name: str, gvk: str = FOO) -> Key:
    return Key(gvk, "default", name)


def test_key_of_an_object_is_its_kind_namespace_and_name() -> None:
    obj = {"metadata": {"name": "a", "namespace": "ns", "uid": "u"}}
    assert Key.of(GVK("example.com", "v1", "Foo"), obj) == Key(FOO, "ns", "a")
    assert Key.of(FOO, obj) == Key(FOO, "ns", "a")  # a kind already written as a key's gvk


def test_key_of_a_cluster_scoped_or_malformed_object() -> None:
    assert Key.of(FOO, {"metadata": {"name": "a"}}) == Key(FOO, "", "a")
    assert Key.of(FOO, {}) == Key(FOO, "", "")
    assert Key.of(FOO, {"metadata": {"name": 5, "namespace": None}}) == Key(FOO, "", "")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make(clock: FakeClock, *, limits: dict[str, int] | None = None, total: int = 10, **kw: float) -> WorkQueue:
    return WorkQueue(
        global_limit=total,
        per_kind_limits=limits if limits is not None else {FOO: 10, BAR: 10},
        clock=clock,
        **kw,
    )


def drain(queue: WorkQueue) -> list[str]:
    """Take every key due now (without finishing them)."""
    out = []
    while (got := queue.get(timeout=0)) is not None:
        out.append(got.name)
    return out


def test_key_str() -> None:
    assert str(key("a")) == "Foo.v1.example.com default/a"
    assert str(Key(FOO, "", "cluster-wide")) == "Foo.v1.example.com cluster-wide"


def test_adding_a_waiting_key_twice_collapses(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("a"))
    queue.add(key("a"))
    assert queue.depth() == 1
    assert drain(queue) == ["a"]


def test_keys_come_out_in_order(clock: FakeClock) -> None:
    queue = make(clock)
    for name in "cab":
        queue.add(key(name))
    assert drain(queue) == ["c", "a", "b"]


def test_a_key_being_processed_is_not_handed_out_again(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("a"))
    assert queue.get(timeout=0) == key("a")
    queue.add(key("a"))
    queue.add(key("a"))
    assert queue.get(timeout=0) is None
    assert queue.processing() == 1
    queue.done(key("a"))
    assert drain(queue) == ["a"]  # back once, however often it was added meanwhile
    queue.done(key("a"))
    assert queue.get(timeout=0) is None


def test_done_without_new_adds_does_not_requeue(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("a"))
    queue.get(timeout=0)
    queue.done(key("a"))
    assert queue.get(timeout=0) is None
    assert queue.depth() == 0


def test_delayed_key_becomes_due(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("a"), delay=30)
    assert queue.get(timeout=0) is None
    assert queue.depth() == 1
    clock.advance(29.9)
    assert queue.get(timeout=0) is None
    clock.advance(0.1)
    assert queue.get(timeout=0) == key("a")


def test_earlier_due_time_wins(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("a"), delay=30)
    queue.add(key("a"), delay=10)
    queue.add(key("a"), delay=20)  # later than the 10 s already asked for: ignored
    clock.advance(10)
    assert drain(queue) == ["a"]


def test_immediate_add_overrides_a_delay_and_the_old_delay_does_not_fire(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("a"), delay=30)
    queue.add(key("a"))
    assert queue.get(timeout=0) == key("a")
    queue.done(key("a"))
    clock.advance(60)
    assert queue.get(timeout=0) is None


def test_delayed_keys_come_due_in_due_order(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("late"), delay=20)
    queue.add(key("early"), delay=5)
    clock.advance(20)
    assert drain(queue) == ["early", "late"]


def test_per_kind_cap(clock: FakeClock) -> None:
    queue = make(clock, limits={FOO: 1, BAR: 2})
    for name in ("f1", "f2"):
        queue.add(key(name, FOO))
    for name in ("b1", "b2", "b3"):
        queue.add(key(name, BAR))
    assert drain(queue) == ["f1", "b1", "b2"]
    queue.done(key("f1", FOO))
    assert drain(queue) == ["f2"]
    queue.done(key("b1", BAR))
    assert drain(queue) == ["b3"]


def test_unknown_kind_defaults_to_one_at_a_time(clock: FakeClock) -> None:
    queue = make(clock, limits={})
    queue.add(key("a"))
    queue.add(key("b"))
    assert drain(queue) == ["a"]


def test_global_cap(clock: FakeClock) -> None:
    queue = make(clock, total=2)
    for name in ("f1", "f2"):
        queue.add(key(name, FOO))
    queue.add(key("b1", BAR))
    assert drain(queue) == ["f1", "f2"]
    queue.done(key("f2", FOO))
    assert drain(queue) == ["b1"]


def test_changes_go_before_resyncs_that_came_due_earlier(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("idle1"), delay=1, priority=PRIORITY_RESYNC)
    queue.add(key("idle2"), priority=PRIORITY_RESYNC)
    clock.advance(5)
    queue.add(key("changed"), priority=PRIORITY_CHANGE)
    assert drain(queue) == ["changed", "idle2", "idle1"]


def test_a_change_raises_a_waiting_resync(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("r1"), priority=PRIORITY_RESYNC)
    queue.add(key("r2"), priority=PRIORITY_RESYNC)
    queue.add(key("r2"), priority=PRIORITY_CHANGE)
    queue.add(key("r1"), priority=PRIORITY_RESYNC)  # never lowered
    assert drain(queue) == ["r2", "r1"]


def test_change_while_processing_comes_back_as_a_change(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("a"))
    queue.get(timeout=0)
    queue.add(key("idle"), priority=PRIORITY_RESYNC)
    queue.add(key("a"), priority=PRIORITY_CHANGE)
    queue.done(key("a"))
    assert drain(queue) == ["a", "idle"]


def test_change_while_processing_beats_a_resync_that_came_due_meanwhile(clock: FakeClock) -> None:
    queue = make(clock, limits={FOO: 1})
    queue.add(key("a"))
    queue.get(timeout=0)
    queue.add(key("a"), delay=1, priority=PRIORITY_RESYNC)  # e.g. requeue_after from an earlier run
    queue.add(key("idle"), priority=PRIORITY_RESYNC)  # waits: Foo is at its cap
    clock.advance(1)
    assert queue.get(timeout=0) is None  # promotes a's resync while a is still running
    queue.add(key("a"), priority=PRIORITY_CHANGE)  # the watch sees a new generation
    queue.done(key("a"))
    assert queue.get(timeout=0) == key("a")


def test_delayed_add_while_processing_waits_for_its_time(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("a"))
    queue.get(timeout=0)
    queue.add(key("a"), delay=10)
    queue.done(key("a"))
    assert queue.get(timeout=0) is None
    clock.advance(10)
    assert drain(queue) == ["a"]


def test_backoff_doubles_and_caps(clock: FakeClock) -> None:
    queue = make(clock, backoff_base=1.0, backoff_cap=8.0)
    delays = [queue.add_rate_limited(key("a")) for _ in range(6)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert queue.failures(key("a")) == 6
    assert queue.failures(key("b")) == 0


def test_a_key_failing_for_days_stays_at_the_cap(clock: FakeClock) -> None:
    """2**n of the backoff overflowed a float at the 1,025th failure of one key (three and a half days at
    the 300 s cap), and add_rate_limited raised."""
    queue = make(clock, backoff_base=1.0, backoff_cap=300.0)
    delays = [queue.add_rate_limited(key("a")) for _ in range(1100)]
    assert delays[-100:] == [300.0] * 100


def test_forget_resets_backoff(clock: FakeClock) -> None:
    queue = make(clock, backoff_base=2.0, backoff_cap=60.0)
    queue.add_rate_limited(key("a"))
    queue.add_rate_limited(key("a"))
    queue.forget(key("a"))
    assert queue.failures(key("a")) == 0
    assert queue.add_rate_limited(key("a")) == 2.0


def test_rate_limited_key_waits_for_its_delay(clock: FakeClock) -> None:
    queue = make(clock, backoff_base=4.0)
    queue.add_rate_limited(key("a"))
    assert queue.get(timeout=0) is None
    clock.advance(4)
    assert queue.get(timeout=0) == key("a")


def test_discard_drops_ready_delayed_and_dirty_keys(clock: FakeClock) -> None:
    queue = make(clock)
    queue.add(key("ready"))
    queue.add(key("later"), delay=5)
    queue.add(key("busy"))
    assert queue.get(timeout=0) == key("ready")
    queue.done(key("ready"))
    queue.add(key("ready"))
    assert queue.get(timeout=0) == key("busy")
    queue.add(key("busy"))  # dirty
    queue.add_rate_limited(key("later"))
    for name in ("ready", "later", "busy"):
        queue.discard(key(name))
    queue.done(key("busy"))
    clock.advance(60)
    assert queue.get(timeout=0) is None
    assert queue.depth() == 0
    assert queue.failures(key("later")) == 0


def test_get_with_a_timeout_returns_none_when_nothing_comes() -> None:
    queue = WorkQueue(global_limit=1, per_kind_limits={FOO: 1})  # the real clock: the timeout must pass
    assert queue.get(timeout=0.01) is None


def test_shutdown_unblocks_a_waiting_get(clock: FakeClock) -> None:
    queue = make(clock)
    got: list[Key | None] = [key("sentinel")]
    worker = threading.Thread(target=lambda: got.__setitem__(0, queue.get()), daemon=True)
    worker.start()
    assert clock.called.wait(10)  # the worker is inside get(), waiting on the queue's lock or condition
    queue.shutdown()
    worker.join(10)
    assert not worker.is_alive()
    assert got == [None]


def test_add_after_shutdown_is_ignored(clock: FakeClock) -> None:
    queue = make(clock)
    queue.shutdown()
    queue.add(key("a"))
    assert queue.depth() == 0
    assert queue.get(timeout=0) is None


# -- periodic resyncs spread over their period ----------------------------------------------------------

KEYS = st.builds(Key, st.sampled_from([FOO, BAR]), st.text(max_size=20), st.text(min_size=1, max_size=40))


@given(KEYS, st.floats(0.5, 10 * 365 * 86400.0), st.floats(0, 4e9))
def test_a_resync_is_never_later_than_its_period(k: Key, period: float, now: float) -> None:
    delay = resync_delay(k, period, now)
    assert 0 < delay <= period


@given(KEYS, st.floats(1.0, 86400.0), st.floats(0, 4e9), st.floats(0, 0.99))
def test_between_resyncs_the_interval_is_the_period(k: Key, period: float, now: float, run: float) -> None:
    """A key keeps its phase: the run that a resync starts (``run`` of the period long) schedules the
    next one a whole period after the first was due."""
    due = now + resync_delay(k, period, now)
    again = due + run * period
    assert (again + resync_delay(k, period, again)) - due == pytest.approx(period, rel=1e-6, abs=1e-3)


def test_objects_created_together_come_due_spread_over_the_period() -> None:
    period, now = 3600.0, 1_800_000_000.0
    delays = [resync_delay(Key(FOO, "ns", f"foo-{i:05d}"), period, now) for i in range(10_000)]
    buckets = [0] * 10
    for delay in delays:
        buckets[min(9, int(delay / period * 10))] += 1
    assert all(850 <= count <= 1150 for count in buckets), buckets  # ~1,000 in every tenth of the period


def test_no_period_no_resync() -> None:
    assert resync_delay(key("a"), 0.0, 1.0) == 0.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["change", "resync", "later", "tick", "take"]), st.integers(0, 5)),
        max_size=60,
    )
)
def test_a_due_change_always_goes_before_any_resync(steps: list[tuple[str, int]]) -> None:
    """Whatever was queued when, a worker never gets a resync (or retry) while a change is due and free."""
    clock = FakeClock()
    queue = make(clock, total=100, limits={FOO: 100})
    changes: set[Key] = set()
    for action, n in steps:
        k = key(f"o{n}")
        if action == "change":
            queue.add(k, priority=PRIORITY_CHANGE)
            changes.add(k)
        elif action == "resync":
            queue.add(k, priority=PRIORITY_RESYNC)
        elif action == "later":
            queue.add(k, delay=n + 0.5, priority=PRIORITY_RESYNC)
        elif action == "tick":
            clock.advance(n)
        else:
            got = queue.get(timeout=0)
            if got is None:
                continue
            if got not in changes:
                assert not changes, f"{got} before the changes {sorted(map(str, changes))}"
            changes.discard(got)
            queue.done(got)


# -- spare lanes: no namespace holds every worker while another waits ------------------------------------


def spare_queue(clock: FakeClock) -> WorkQueue:
    return WorkQueue(global_limit=2, per_kind_limits={FOO: 2}, clock=clock, spare_limit=2)


def in_ns(namespace: str, name: str) -> Key:
    return Key(FOO, namespace, name)


def test_runs_that_hang_open_a_spare_lane_for_another_namespace(clock: FakeClock) -> None:
    q = spare_queue(clock)
    for name in ("hang-1", "hang-2", "hang-3"):
        q.add(in_ns("a", name))
    held = [q.get(timeout=0), q.get(timeout=0)]
    assert {k.namespace for k in held if k} == {"a"}
    q.add(in_ns("b", "new"))
    assert q.get(timeout=0) is None  # runs of a few seconds open nothing
    clock.advance(9.9)
    assert q.get(timeout=0) is None
    clock.advance(0.2)  # both regular lanes' runs have gone on for 10 s: b gets a spare lane
    assert q.get(timeout=0) == in_ns("b", "new")
    assert q.get(timeout=0) is None  # a has runs in progress: never a spare lane for it


def test_spare_lanes_are_bounded_and_go_one_per_waiting_namespace(clock: FakeClock) -> None:
    q = spare_queue(clock)
    q.add(in_ns("a", "1"))
    q.add(in_ns("a", "2"))
    assert q.get(timeout=0) and q.get(timeout=0)
    for namespace in ("b", "c", "d"):
        q.add(in_ns(namespace, "x"))
        q.add(in_ns(namespace, "y"))
    clock.advance(11)
    spares = [q.get(timeout=0), q.get(timeout=0), q.get(timeout=0)]
    assert [k.namespace if k else None for k in spares] == ["b", "c", None]  # spare_limit 2: d waits
    q.done(in_ns("a", "1"))  # three still run, past the cap of two, and b's and c's are new: d waits
    assert q.get(timeout=0) is None
    q.done(in_ns("b", "x"))
    q.done(in_ns("c", "x"))  # back under the cap: d's turn comes before b's and c's second keys
    assert q.get(timeout=0) == in_ns("d", "x")


def test_a_blocked_worker_wakes_when_the_runs_stall(clock: FakeClock) -> None:
    q = spare_queue(clock)
    q.add(in_ns("a", "1"))
    q.add(in_ns("a", "2"))
    assert q.get(timeout=0) and q.get(timeout=0)
    q.add(in_ns("b", "new"))
    got: list[Key | None] = []
    waiter = threading.Thread(target=lambda: got.append(q.get(timeout=5)))
    clock.called.clear()
    waiter.start()
    clock.called.wait(2)
    clock.advance(10)
    with q._cond:  # what the clock cannot do: wake the wait (the real one would have timed out by now)
        q._cond.notify_all()
    waiter.join(5)
    assert got == [in_ns("b", "new")]


def test_without_spare_lanes_the_caps_hold_as_before(clock: FakeClock) -> None:
    q = WorkQueue(global_limit=2, per_kind_limits={FOO: 2}, clock=clock)
    q.add(in_ns("a", "1"))
    q.add(in_ns("a", "2"))
    q.add(in_ns("b", "3"))
    assert q.get(timeout=0) and q.get(timeout=0)
    clock.advance(3600)
    assert q.get(timeout=0) is None
