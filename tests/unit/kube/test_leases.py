"""Leader election over a fake Lease store on a fake clock: acquire, stand by, take over, renew, lose, release.

The fake API server keeps one Lease with a resourceVersion (a PUT from a stale read is a Conflict, as on a
real server); the clock moves only when an elector waits, by the time it waits, so nothing sleeps.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

import pytest

from hybrid_operator.kube import leases
from hybrid_operator.kube.client import ApiError, KubeObject
from hybrid_operator.kube.leases import LeaderElector

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
LEASE = LEASES + "/op-lock"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class LeaseServer:
    def __init__(self) -> None:
        self.lease: KubeObject | None = None
        self.version = 0
        self.writes: list[tuple[str, KubeObject]] = []
        self.errors: dict[str, ApiError] = {}  # method -> the error it answers with, while set

    def request(self, method: str, path: str, *, body: Any = None) -> KubeObject:
        if method in self.errors:
            raise self.errors[method]
        if method == "GET":
            assert path == LEASE
            if self.lease is None:
                raise ApiError(404, "Not Found")
            return copy.deepcopy(self.lease)
        if method == "POST":
            assert path == LEASES
            if self.lease is not None:
                raise ApiError(409, "AlreadyExists")
            return self._store(method, body)
        assert (method, path) == ("PUT", LEASE)
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict")
        return self._store(method, body)

    def _store(self, method: str, body: KubeObject) -> KubeObject:
        self.version += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.lease = stored
        self.writes.append((method, copy.deepcopy(stored)))
        return copy.deepcopy(stored)

    @property
    def spec(self) -> dict[str, Any]:
        assert self.lease is not None
        return dict(self.lease["spec"])

    def held_by(self, holder: str | None, *, duration: int = 15, renew: str = "t0", transitions: int = 0) -> None:
        self._store(
            "seed",
            {
                "metadata": {"name": "op-lock", "namespace": "ns"},
                "spec": {
                    "holderIdentity": holder,
                    "leaseDurationSeconds": duration,
                    "renewTime": renew,
                    "leaseTransitions": transitions,
                },
            },
        )

    def renew_by_holder(self) -> None:
        """The other holder renews: its record changes."""
        assert self.lease is not None
        self.lease["spec"]["renewTime"] = f"renewed-{self.version}"
        self.version += 1
        self.lease["metadata"]["resourceVersion"] = str(self.version)


class Stop(threading.Event):
    """Waiting moves the fake clock; ``each`` runs after every wait; set after ``limit`` waits."""

    def __init__(self, clock: Clock, limit: int = 100, each: Callable[[int], None] | None = None) -> None:
        super().__init__()
        self.clock, self.limit, self.each = clock, limit, each
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        self.clock.now += timeout or 0.0
        if self.each is not None:
            self.each(self.waits)
        if self.waits >= self.limit:
            self.set()
        return self.is_set()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(leases, "time", fake)
    monkeypatch.setattr(leases, "_micro_now", lambda: f"stamp-{fake.now:.1f}")
    return fake


@pytest.fixture
def server() -> LeaseServer:
    return LeaseServer()


def elector(server: LeaseServer, identity: str = "me") -> LeaderElector:
    return LeaderElector(server, "ns", "op-lock", identity)  # type: ignore[arg-type]


# -- acquiring -----------------------------------------------------------------------------------------


def test_no_lease_yet_is_created_and_held(clock: Clock, server: LeaseServer) -> None:
    me = elector(server)
    assert me.acquire(Stop(clock))
    assert me.leading.is_set()
    [(method, lease)] = server.writes
    assert method == "POST"
    assert lease["metadata"] == {"name": "op-lock", "namespace": "ns", "resourceVersion": "1"}
    assert lease["spec"] == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "stamp-1000.0",
        "renewTime": "stamp-1000.0",
        "leaseTransitions": 0,
    }


def test_a_released_lease_is_taken_at_once_counting_the_transition(clock: Clock, server: LeaseServer) -> None:
    server.held_by(None, duration=1, transitions=3)
    stop = Stop(clock)
    assert elector(server).acquire(stop)
    assert stop.waits == 0
    spec = server.spec
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["leaseDurationSeconds"]) == ("me", 4, 15)
    assert spec["acquireTime"] == spec["renewTime"] == "stamp-1000.0"


def test_a_lease_held_and_renewed_by_another_is_never_taken(clock: Clock, server: LeaseServer) -> None:
    server.held_by("other")
    stop = Stop(clock, limit=20, each=lambda _: server.renew_by_holder())
    me = elector(server)
    assert me.acquire(stop) is False
    assert not me.leading.is_set()
    assert server.spec["holderIdentity"] == "other"
    assert [m for m, _ in server.writes] == ["seed"]


def test_a_lease_its_holder_stopped_renewing_is_taken_a_lease_duration_after_we_first_saw_it(
    clock: Clock, server: LeaseServer
) -> None:
    server.held_by("other", renew="long ago", transitions=1)
    stop = Stop(clock)
    me = elector(server)
    assert me.acquire(stop)
    # Expiry is judged on our own clock from when we first saw the record, never from its renewTime.
    assert clock.now - 1000.0 == 16.0  # retries every 2 s; 14 s < 15 s, 16 s is past it
    spec = server.spec
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("me", 2)


def test_the_holders_own_lease_duration_decides_when_it_expired(clock: Clock, server: LeaseServer) -> None:
    server.held_by("other", duration=5)
    assert elector(server).acquire(Stop(clock))
    assert clock.now - 1000.0 == 6.0


def test_a_stop_while_waiting_gives_up(clock: Clock, server: LeaseServer) -> None:
    server.held_by("other")
    stop = Stop(clock, limit=1)
    assert elector(server).acquire(stop) is False
    assert stop.waits == 1


def test_two_replicas_racing_for_a_new_lease_only_one_wins(clock: Clock, server: LeaseServer) -> None:
    first, second = elector(server, "a"), elector(server, "b")
    assert first.acquire(Stop(clock))
    assert second.acquire(Stop(clock, limit=1)) is False  # held and freshly renewed
    assert server.spec["holderIdentity"] == "a"


def test_a_create_that_conflicts_is_not_leading(clock: Clock, server: LeaseServer) -> None:
    server.errors["GET"] = ApiError(404, "Not Found")  # the read said none, but someone created it since
    server.held_by("other")
    me = elector(server)
    assert me.acquire(Stop(clock, limit=1)) is False
    assert server.spec["holderIdentity"] == "other"


def test_an_update_that_conflicts_is_retried_on_the_next_read(clock: Clock, server: LeaseServer) -> None:
    server.held_by(None)
    real = server.request
    raced = []

    def racing(method: str, path: str, *, body: Any = None) -> KubeObject:
        if method == "PUT" and not raced:
            raced.append(True)
            server.held_by(None)  # another replica wrote between our read and our write
        return real(method, path, body=body)

    server.request = racing  # type: ignore[method-assign]
    stop = Stop(clock)
    assert elector(server).acquire(stop)
    assert stop.waits == 1
    assert server.spec["holderIdentity"] == "me"


# -- renewing and losing -------------------------------------------------------------------------------


def test_the_leader_renews_every_retry_period(clock: Clock, server: LeaseServer) -> None:
    me = elector(server)
    assert me.acquire(Stop(clock))
    lost: list[bool] = []
    me.keep(Stop(clock, limit=4), lambda: lost.append(True))
    renewals = [lease["spec"]["renewTime"] for method, lease in server.writes if method == "PUT"]
    assert renewals == ["stamp-1002.0", "stamp-1004.0", "stamp-1006.0"]
    assert {lease["spec"]["acquireTime"] for _, lease in server.writes} == {"stamp-1000.0"}
    assert server.spec["leaseTransitions"] == 0
    assert lost == []
    assert me.leading.is_set()


def test_a_renewal_that_fails_briefly_is_not_a_loss(clock: Clock, server: LeaseServer) -> None:
    me = elector(server)
    assert me.acquire(Stop(clock))

    def outage(waits: int) -> None:  # the API server is away for 8 s, less than the renew deadline
        if waits == 1:
            server.errors["GET"] = ApiError(503, "Unavailable")
        if waits == 5:
            server.errors.clear()

    lost: list[bool] = []
    me.keep(Stop(clock, limit=8, each=outage), lambda: lost.append(True))
    assert lost == []
    assert me.leading.is_set()
    assert server.spec["renewTime"] == "stamp-1014.0"


def test_a_renewal_failing_past_the_deadline_reports_the_loss_once(clock: Clock, server: LeaseServer) -> None:
    me = elector(server)
    assert me.acquire(Stop(clock))
    server.errors["GET"] = ApiError(503, "Unavailable")
    lost: list[float] = []
    stop = Stop(clock, limit=100)
    me.keep(stop, lambda: lost.append(clock.now))
    assert lost == [1012.0]  # the first failed try more than 10 s after the last renewal
    assert not me.leading.is_set()
    assert not stop.is_set()  # keep returned on its own


def test_a_lease_taken_by_another_is_lost_at_the_deadline(clock: Clock, server: LeaseServer) -> None:
    me = elector(server)
    assert me.acquire(Stop(clock))

    def stolen(waits: int) -> None:
        if waits == 1:
            server.held_by("other")
        server.renew_by_holder()

    lost: list[float] = []
    me.keep(Stop(clock, limit=100, each=stolen), lambda: lost.append(clock.now))
    assert lost == [1012.0]
    assert server.spec["holderIdentity"] == "other"  # never written over


# -- releasing -----------------------------------------------------------------------------------------


def test_release_lets_a_stand_by_take_over_at_once(clock: Clock, server: LeaseServer) -> None:
    me, other = elector(server), elector(server, "other")
    assert me.acquire(Stop(clock))
    assert other.acquire(Stop(clock, limit=1)) is False
    me.release()
    assert not me.leading.is_set()
    assert (server.spec["holderIdentity"], server.spec["leaseDurationSeconds"]) == (None, 1)
    stop = Stop(clock)
    assert other.acquire(stop)
    assert stop.waits == 0


def test_release_when_not_leading_writes_nothing(clock: Clock, server: LeaseServer) -> None:
    server.held_by("other")
    elector(server).release()
    assert [m for m, _ in server.writes] == ["seed"]


def test_release_of_a_lease_someone_else_holds_now_leaves_it(clock: Clock, server: LeaseServer) -> None:
    me = elector(server)
    assert me.acquire(Stop(clock))
    server.held_by("other")
    me.release()
    assert server.spec["holderIdentity"] == "other"
    assert not me.leading.is_set()


def test_release_that_fails_still_stops_leading(clock: Clock, server: LeaseServer) -> None:
    me = elector(server)
    assert me.acquire(Stop(clock))
    server.errors["PUT"] = ApiError(503, "Unavailable")
    me.release()
    assert not me.leading.is_set()
    assert server.spec["holderIdentity"] == "me"


# -- readiness -----------------------------------------------------------------------------------------


def test_can_lead_as_leader_as_stand_by_and_when_the_lease_is_out_of_reach(clock: Clock, server: LeaseServer) -> None:
    me = elector(server)
    assert me.can_lead() == (False, "cannot reach lease ns/op-lock")  # never reached it yet
    server.held_by("other")
    assert me.acquire(Stop(clock, limit=1)) is False
    assert me.can_lead() == (True, "standing by; can take over lease ns/op-lock")
    clock.now += 7  # more than 3 retry periods without reading it
    assert me.can_lead()[0] is False
    server.held_by(None)
    assert me.acquire(Stop(clock))
    assert me.can_lead() == (True, "leading")
