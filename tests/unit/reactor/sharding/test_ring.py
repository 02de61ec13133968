"""reactor.sharding: rings over a fake Lease store, on a fake clock: join, drain handshake, expiry, loss."""

from __future__ import annotations

import threading
from typing import Any

from hybrid_operator.kube.client import ApiError
from hybrid_operator.reactor.queueing import Key
from hybrid_operator.reactor.sharding import rules as shards
from hybrid_operator.reactor.sharding.members import ACK_ANNOTATION, Record, _record
from hybrid_operator.reactor.sharding.ring import Ring
from hybrid_operator.reactor.sharding.rules import Verdict

UIDS = [f"uid-{i}" for i in range(500)]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Store:
    """The API server's Leases of one ring: member -> (renew stamp, ack)."""

    def __init__(self) -> None:
        self.leases: dict[str, tuple[str, str | None]] = {}
        self.stamp = 0


class FakeLeases:
    def __init__(self, store: Store, member: str) -> None:
        self.store, self.member, self.name = store, member, f"lease-{member}"
        self.namespace, self.ring = "ns", "hybrid-operator"
        self.failing = False

    def renew(self, ack: str | None) -> None:
        if self.failing:
            raise ApiError(503, "unavailable")
        self.store.stamp += 1
        self.store.leases[self.member] = (str(self.store.stamp), ack)

    def list(self) -> list[Record]:
        if self.failing:
            raise ApiError(503, "unavailable")
        return [Record(f"lease-{m}", m, stamp, 3.0, ack) for m, (stamp, ack) in self.store.leases.items()]

    def delete(self) -> None:
        self.store.leases.pop(self.member, None)


def ring(store: Store, member: str, clock: Clock, lost: threading.Event | None = None) -> Ring:
    views: list[Any] = []
    return Ring(
        FakeLeases(store, member),  # type: ignore[arg-type]
        lease_duration=3.0,
        on_view=lambda old, new: views.append(new),
        on_lost=(lost or threading.Event()).set,
        clock=clock,
    )


def settle(*rings: Ring, rounds: int = 4) -> None:
    for _ in range(rounds):
        for r in rings:
            r.tick()


def key(uid: str) -> Key:
    return Key("Open.v1.test", "ns", uid)


def test_two_members_join_and_split_the_objects_without_sharing_any() -> None:
    store, clock = Store(), Clock()
    a, b = ring(store, "a", clock), ring(store, "b", clock)
    settle(a, b)
    assert a.joined.is_set() and b.joined.is_set()
    assert a.view() == b.view() == frozenset({"a", "b"})
    for uid in UIDS[:100]:
        verdicts = {a.begin(key(uid), uid), b.begin(key(uid), uid)}
        assert verdicts == {Verdict.RUN, Verdict.DROP}


def test_an_object_moves_to_a_joiner_only_after_the_old_owner_finished_its_run() -> None:
    store, clock = Store(), Clock()
    a = ring(store, "a", clock)
    settle(a)
    ab = frozenset({"a", "b"})
    uid = next(u for u in UIDS if shards.owner(u, ab) == "b")
    assert a.begin(key(uid), uid) is Verdict.RUN  # a alone: everything is a's
    b = ring(store, "b", clock)
    settle(a, b)
    assert b.begin(key(uid), uid) is Verdict.WAIT  # a still runs it and has not drained for {a, b}
    assert a.begin(key(uid), uid) is Verdict.DROP  # and a starts no new run of it
    a.end(key(uid))
    settle(a, b)
    assert b.begin(key(uid), uid) is Verdict.RUN
    assert key(uid) in b.take_parked()


def test_a_member_whose_lease_expired_counts_as_gone_and_its_objects_move() -> None:
    store, clock = Store(), Clock()
    a, b = ring(store, "a", clock), ring(store, "b", clock)
    settle(a, b)
    a.tick()  # a has seen b's last renew
    uid = next(u for u in UIDS if shards.owner(u, frozenset({"a", "b"})) == "b")
    assert a.begin(key(uid), uid) is Verdict.DROP
    clock.now += 2.0  # b silent, but not for a lease yet
    settle(a)
    assert a.view() == frozenset({"a", "b"})
    clock.now += 2.0  # now past b's 3 s, as a measures it
    settle(a)
    assert a.view() == frozenset({"a"})
    assert a.begin(key(uid), uid) is Verdict.RUN


def test_a_member_that_left_cleanly_hands_over_at_once() -> None:
    store, clock = Store(), Clock()
    a, b = ring(store, "a", clock), ring(store, "b", clock)
    settle(a, b)
    b.leave()
    settle(a)
    assert a.view() == frozenset({"a"})


def test_a_peer_with_a_garbage_ack_blocks_our_starts() -> None:
    store, clock = Store(), Clock()
    a = ring(store, "a", clock)
    store.leases["b"] = ("1", "{not json")
    settle(a)
    uid = next(u for u in UIDS if shards.owner(u, frozenset({"a", "b"})) == "a")
    assert a.begin(key(uid), uid) is Verdict.WAIT


def test_a_member_that_cannot_renew_past_the_deadline_gives_up() -> None:
    store, clock = Store(), Clock()
    lost = threading.Event()
    a = ring(store, "a", clock, lost)
    settle(a)
    a.leases.failing = True  # type: ignore[attr-defined]
    stop = threading.Event()
    clock.now += 2.5  # past the 2 s deadline (2/3 of 3 s), short of the lease
    a.run(stop)  # returns as soon as it sees it is lost
    assert lost.is_set()


def test_a_member_whose_lease_was_deleted_gives_up() -> None:
    store, clock = Store(), Clock()
    lost = threading.Event()
    a = ring(store, "a", clock, lost)
    settle(a)
    a.leases.renew = lambda ack: None  # type: ignore[attr-defined,method-assign]
    del store.leases["a"]
    a.run(threading.Event())
    assert lost.is_set()


def test_readiness_waits_for_the_ring() -> None:
    store, clock = Store(), Clock()
    a = ring(store, "a", clock)
    assert not a.status()[0]
    settle(a)
    assert a.status() == (True, "member a of a ring of 1")


def test_hostile_lease_records_are_skipped_or_bounded() -> None:
    assert _record("not a lease", 15.0) is None
    assert _record({"metadata": "x", "spec": []}, 15.0) is None
    assert _record({"metadata": {"name": "l"}, "spec": {"holderIdentity": 7}}, 15.0) is None
    assert _record({"metadata": {"name": "l"}, "spec": {"holderIdentity": "x" * 1000}}, 15.0) is None
    odd = {
        "metadata": {"name": "l", "annotations": {ACK_ANNOTATION: {"nested": True}}},
        "spec": {"holderIdentity": "b", "leaseDurationSeconds": 10**9, "renewTime": 5},
    }
    record = _record(odd, 15.0)
    assert record is not None
    assert (record.member, record.duration, record.renewed) == ("b", 15.0, "")
    assert shards.parse_ack(record.ack) is None
    ok = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "b", "leaseDurationSeconds": True}}
    assert _record(ok, 15.0).duration == 15.0  # type: ignore[union-attr]


def test_after_a_failed_write_of_a_new_ack_nothing_starts_until_a_write_lands() -> None:
    """The failed write may have reached the server: our published ack is unknown until the next one."""
    store, clock = Store(), Clock()
    a = ring(store, "a", clock)
    settle(a)
    uid = next(u for u in UIDS if shards.owner(u, frozenset({"a", "b"})) == "a")
    b = ring(store, "b", clock)
    b.tick()  # b is in the ring, claiming nothing yet
    a._observe(a.leases.list())  # a sees b: its view is now {a, b}, its ack still {a}
    a.leases.failing = True  # type: ignore[attr-defined]
    a._renew()  # the write of ack {a, b} fails (or did it land?)
    assert a.begin(key(uid), uid) is Verdict.WAIT
    a.leases.failing = False  # type: ignore[attr-defined]
    settle(a, b)
    assert a.begin(key(uid), uid) is Verdict.RUN
