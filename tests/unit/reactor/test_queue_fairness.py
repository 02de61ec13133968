"""Fair queueing across namespaces: one tenant's flood cannot hold up another's new object, nor is starved.

Pure and on a fake clock, like test_queueing.py (whose guarantees hold within one namespace): the
workers are simulated by ``get`` and ``done``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.reactor import queueing
from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, PRIORITY_RESYNC, Key, WorkQueue
from tests.fakes import FakeClock

pytestmark = pytest.mark.timeout(60)

FOO, BAR = "Foo.v1.example.com", "Bar.v1.example.com"


def make(workers: int = 4, limits: dict[str, int] | None = None) -> WorkQueue:
    per_kind = limits if limits is not None else {FOO: workers, BAR: workers}
    return WorkQueue(global_limit=workers, per_kind_limits=per_kind, clock=FakeClock())


def k(namespace: str, name: str, gvk: str = FOO) -> Key:
    return Key(gvk, namespace, name)


def take(queue: WorkQueue, n: int) -> list[Key]:
    """Up to ``n`` keys, each finished before the next is taken (one worker going through them)."""
    out = []
    for _ in range(n):
        key = queue.get(timeout=0)
        if key is None:
            break
        queue.done(key)
        out.append(key)
    return out


def test_a_new_namespace_goes_before_a_flood_already_queued() -> None:
    """The issue's case: tenant a creates 120 objects, then tenant b one; b's is the next to run."""
    queue = make(workers=4)
    for i in range(120):
        queue.add(k("a", f"a{i}"))
    running = [queue.get(timeout=0) for _ in range(4)]
    assert [key.name for key in running if key] == ["a0", "a1", "a2", "a3"]
    queue.add(k("b", "b0"))
    assert running[0] is not None
    queue.done(running[0])  # the first run of the flood to finish frees a worker: b's object is next
    assert queue.get(timeout=0) == k("b", "b0")


def test_one_worker_runs_the_new_namespace_right_after_the_current_run() -> None:
    queue = make(workers=1)
    for i in range(120):
        queue.add(k("a", f"a{i}"))
    first = queue.get(timeout=0)
    queue.add(k("b", "b0"))
    assert first is not None
    queue.done(first)
    assert queue.get(timeout=0) == k("b", "b0")


def test_namespaces_take_turns_and_each_keeps_its_order() -> None:
    queue = make()
    for name in ("a1", "a2", "a3"):
        queue.add(k("a", name))
    for name in ("b1", "b2"):
        queue.add(k("b", name))
    queue.add(k("", "cluster-scoped"))
    assert [key.name for key in take(queue, 10)] == ["a1", "b1", "cluster-scoped", "a2", "b2", "a3"]


def test_a_namespace_that_just_had_its_turn_goes_after_those_waiting() -> None:
    queue = make(workers=1)
    queue.add(k("a", "a1"))
    queue.add(k("b", "b1"))
    queue.add(k("b", "b2"))
    assert take(queue, 1) == [k("a", "a1")]
    queue.add(k("a", "a2"))  # a is back with work, but b has waited longer
    assert [key.name for key in take(queue, 3)] == ["b1", "a2", "b2"]


def test_adding_a_waiting_key_again_gives_its_namespace_no_extra_turn() -> None:
    queue = make(workers=1)
    queue.add(k("a", "a1"))
    queue.add(k("a", "a2"))
    queue.add(k("b", "b1"))
    queue.add(k("a", "a1"))
    queue.add(k("a", "a2"))
    assert [key.name for key in take(queue, 3)] == ["a1", "b1", "a2"]


def test_changes_go_before_resyncs_whatever_the_namespace() -> None:
    queue = make(workers=1)
    queue.add(k("idle", "r1"), priority=PRIORITY_RESYNC)
    queue.add(k("a", "c1"), priority=PRIORITY_CHANGE)
    queue.add(k("a", "c2"), priority=PRIORITY_CHANGE)
    assert [key.name for key in take(queue, 3)] == ["c1", "c2", "r1"]


def test_a_namespace_whose_kind_is_at_its_cap_lets_the_next_namespace_run() -> None:
    queue = make(workers=4, limits={FOO: 1, BAR: 4})
    queue.add(k("a", "f1"))
    queue.add(k("a", "f2"))
    queue.add(k("a", "b1", BAR))
    queue.add(k("b", "f3"))
    queue.add(k("b", "b2", BAR))
    got = [queue.get(timeout=0) for _ in range(4)]
    # a's f1, then b's turn (its Foo must wait for the cap: its Bar), then a's Bar past its waiting Foo.
    assert got == [k("a", "f1"), k("b", "b2", BAR), k("a", "b1", BAR), None]


def test_what_it_remembers_of_past_turns_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queueing, "TURNS_REMEMBERED", 8)
    queue = make(workers=1)
    for i in range(100):
        queue.add(k(f"ns-{i}", "x"))
        assert len(take(queue, 1)) == 1
        assert len(queue._turns) <= 2 * 8


# -- properties, over any interleaving of adds and of workers taking and finishing keys ---------------

NAMESPACES = ["a", "b", "c", "d", ""]
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(NAMESPACES), st.integers(min_value=0, max_value=30)),
        st.tuples(st.just("get"), st.just(""), st.just(0)),
        st.tuples(st.just("done"), st.just(""), st.integers(min_value=0, max_value=3)),
    ),
    max_size=200,
)


class Workers:
    """``workers`` workers on a queue, and a model of what it should hold: a FIFO per namespace. Each step
    checks the queue against the model and counts the turns each waiting namespace has seen others take."""

    def __init__(self, workers: int) -> None:
        self.queue, self.workers = make(workers), workers
        self.waiting: dict[str, list[Key]] = {ns: [] for ns in NAMESPACES}
        self.processing: list[Key] = []
        self.dirty: set[Key] = set()
        self.turns_seen: dict[str, dict[str, int]] = {ns: {} for ns in NAMESPACES}

    def add(self, key: Key) -> None:
        self.queue.add(key)
        if key in self.processing:
            self.dirty.add(key)
        elif key not in self.waiting[key.namespace]:
            self.waiting[key.namespace].append(key)

    def get(self) -> bool:
        key = self.queue.get(timeout=0)
        if key is None:  # work-conserving: idle only when every worker is busy or nothing waits
            assert len(self.processing) == self.workers or not any(self.waiting.values())
            return False
        queued = self.waiting[key.namespace]
        assert queued and queued[0] == key, "not the oldest key of its namespace"
        queued.pop(0)
        self.processing.append(key)
        self.turns_seen[key.namespace] = {}
        for other, keys in self.waiting.items():
            if keys and other != key.namespace:
                seen = self.turns_seen[other][key.namespace] = self.turns_seen[other].get(key.namespace, 0) + 1
                assert seen <= 1, f"{other!r} waited through two turns of {key.namespace!r}"
        return True

    def finish(self, index: int) -> None:
        key = self.processing.pop(index % len(self.processing))
        self.queue.done(key)
        if key in self.dirty:
            self.dirty.discard(key)
            self.waiting[key.namespace].append(key)

    def drain(self) -> None:
        while self.processing or any(self.waiting.values()):
            while self.get():
                pass
            assert self.processing, "keys are waiting but none is handed out"
            self.finish(0)
        assert self.queue.depth() == 0


@settings(max_examples=300, deadline=None)
@given(ops=OPS, workers=st.integers(min_value=1, max_value=4))
def test_no_namespace_waits_for_two_turns_of_another(ops: list[tuple[str, str, int]], workers: int) -> None:
    """While a namespace has a key waiting, no other namespace gets a second turn before it gets one; each
    namespace's keys come out in the order they were queued; a free worker is never left idle; and in the
    end everything queued runs (nothing starves)."""
    model = Workers(workers)
    for op, namespace, n in ops:
        if op == "add":
            model.add(k(namespace, f"x{n}"))
        elif op == "get":
            model.get()
        elif model.processing:
            model.finish(n)
    model.drain()


@settings(max_examples=100, deadline=None)
@given(
    flood=st.integers(min_value=1, max_value=200),
    workers=st.integers(min_value=1, max_value=8),
    tenants=st.integers(min_value=1, max_value=6),
)
def test_a_flood_shares_the_workers_with_every_other_namespace(flood: int, workers: int, tenants: int) -> None:
    """One namespace queues ``flood`` keys, then each of the others one: each other's key runs within the
    first ``tenants`` runs to finish, and the flood gets every turn no one else needs."""
    queue = make(workers)
    for i in range(flood):
        queue.add(k("flood", f"f{i}"))
    running = [key for key in (queue.get(timeout=0) for _ in range(workers)) if key is not None]
    for t in range(tenants):
        queue.add(k(f"tenant-{t}", "new"))
    order: list[Key] = []
    while running:
        queue.done(running.pop(0))
        nxt = queue.get(timeout=0)
        if nxt is not None:
            order.append(nxt)
            running.append(nxt)
    tenants_at = [i for i, key in enumerate(order) if key.namespace != "flood"]
    assert tenants_at == list(range(tenants))  # ahead of the flood, in the order they came
    assert sum(key.namespace == "flood" for key in order) == flood - min(flood, workers)
