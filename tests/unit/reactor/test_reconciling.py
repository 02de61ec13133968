"""The reconciler's decisions, against a fake API server, a fake executor and a fake Event recorder.

Each test reconciles one object and looks at what an observer would see: what the "API server" holds
afterwards (status, finalizers), the Events recorded, whether a run happened and with what, and the
``Outcome`` the worker acts on. Nothing here talks to a cluster or runs Ansible.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.extravars import KNOWN_RESERVED_KEYS
from hybrid_operator.ansible.reserved import Reservations
from hybrid_operator.ansible.results import FailedTask, RoleEvent, RunResult
from hybrid_operator.errors import TemporaryError
from hybrid_operator.kube.client import ApiError, KubeObject, Resource
from hybrid_operator.kube.objects import GVK
from hybrid_operator.kube.owners import Owner
from hybrid_operator.proxy.confining import ANYWHERE, Reach
from hybrid_operator.reactor import ownwrites, reconciling
from hybrid_operator.reactor.annotations import RECONCILE_PERIOD
from hybrid_operator.reactor.queueing import Key, resync_delay
from hybrid_operator.reactor.reconciling import MIN_REQUEUE, OWNER_ENV, KindContext, Outcome, Reconciler
from hybrid_operator.reactor.resuming import RECORD
from hybrid_operator.settings.watches import Finalizer, Target, Watch
from tests.fakes import FakeExecutor, FakeKube, FakeProxy

GROUP_GVK = GVK("cache.example.com", "v1alpha1", "Memcached")
RESOURCE = Resource(GROUP_GVK, "memcacheds", True)
KEY = Key(str(GROUP_GVK), "ns", "mc")
FINALIZER = "cache.example.com/finalizer"
RESERVATIONS = Reservations(frozenset({"hostvars", "omit"}), KNOWN_RESERVED_KEYS, None)


# -- fakes ----------------------------------------------------------------------------------------------


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def record(self, obj: KubeObject, event_type: str, reason: str, message: str) -> None:
        assert obj["metadata"]["name"] == "mc"
        self.events.append((event_type, reason, message))


# -- helpers --------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_ansible_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Admission asks the installed Ansible what it reserves (a child process): answer without one."""
    monkeypatch.setattr(reconciling, "reservations", lambda: RESERVATIONS)


def cr(*, generation: int = 1, spec: Any = None, status: Any = None, **meta: Any) -> KubeObject:
    obj: KubeObject = {
        "apiVersion": GROUP_GVK.api_version,
        "kind": GROUP_GVK.kind,
        "metadata": {"name": "mc", "namespace": "ns", "uid": "uid-1", "generation": generation, **meta},
        "spec": {"size": 1} if spec is None else spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def watch(*, finalizer: Finalizer | None = None, manage_status: bool = True) -> Watch:
    return Watch(
        gvk=GROUP_GVK,
        target=Target(role="memcached"),
        vars={"from_watch": 1},
        finalizer=finalizer,
        manage_status=manage_status,
    )


class World:
    """A reconciler wired to the fakes, with the watch's cache reading the fake API server."""

    def __init__(self, kube: FakeKube, executor: FakeExecutor, recorder: FakeRecorder, reconciler: Reconciler):
        self.kube, self.executor, self.recorder, self.reconciler = kube, executor, recorder, reconciler
        self.cache: Callable[[str, str], KubeObject | None] = self._from_kube

    def _from_kube(self, namespace: str, name: str) -> KubeObject | None:
        obj = self.kube.objects.get((namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def ctx(self, w: Watch | None = None, *, period: float = 0.0) -> KindContext:
        return KindContext(
            watch=w or watch(),
            resource=RESOURCE,
            lookup=lambda ns, name: self.cache(ns, name),
            reconcile_period=period,
        )

    def reconcile(self, w: Watch | None = None, *, period: float = 0.0) -> Outcome:
        return self.reconciler.reconcile(KEY, self.ctx(w, period=period))


@pytest.fixture
def world() -> Iterator[World]:
    kube, recorder = FakeKube(RESOURCE), FakeRecorder()
    executor = FakeExecutor(kube)
    reconciler = Reconciler(kube, executor, recorder)  # type: ignore[arg-type]
    yield World(kube, executor, recorder, reconciler)
    reconciler.close()


def conditions(obj: KubeObject) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions", [])}


def failed(run_id: str = "r", message: str = "quota exceeded") -> RunResult:
    return RunResult(run_id=run_id, ok=2, failures=1, failed_tasks=[FailedTask("memcached : Create", message, "")])


# -- the object is gone, refused, or deleted without us ---------------------------------------------------


def test_an_object_gone_from_the_cache_succeeds_without_a_run(world: World) -> None:
    assert world.reconcile() == Outcome(succeeded=True)
    assert world.executor.requests == []
    assert world.kube.patches == []
    assert world.recorder.events == []


def test_a_refused_object_gets_a_failure_condition_and_a_warning_and_no_run(world: World) -> None:
    world.kube.put(cr(spec={"hostvars": "x"}, generation=4))
    outcome = world.reconcile()
    assert outcome.succeeded is False
    assert outcome.refused == "InvalidSpec"
    assert outcome.retry is False and outcome.requeue_after is None  # not until the object changes
    assert world.executor.requests == []
    failure = conditions(world.kube.stored())["Failure"]
    assert (failure["status"], failure["reason"], failure["observedGeneration"]) == ("True", "InvalidSpec", 4)
    assert "hostvars" in failure["message"]
    assert conditions(world.kube.stored())["Successful"]["status"] == "False"
    [(event_type, reason, message)] = world.recorder.events
    assert (event_type, reason) == ("Warning", "InvalidSpec")
    assert "hostvars" in message
    assert "finalizers" not in world.kube.stored()["metadata"]  # refused before the finalizer, too


def test_a_bad_annotation_is_refused_naming_it(world: World) -> None:
    world.kube.put(cr(annotations={RECONCILE_PERIOD: "1ms"}))
    outcome = world.reconcile()
    assert outcome.refused == "InvalidAnnotation"
    assert world.executor.requests == []
    assert RECONCILE_PERIOD in conditions(world.kube.stored())["Failure"]["message"]


def test_an_ansible_that_failed_its_check_refuses_every_object(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    unsafe = Reservations(RESERVATIONS.names, RESERVATIONS.keys, "templates in extra vars", final=True)
    monkeypatch.setattr(reconciling, "reservations", lambda: unsafe)
    world.kube.put(cr())
    assert world.reconcile().refused == "UnsafeAnsible"
    assert world.executor.requests == []


def test_a_deleting_object_without_a_finalizer_in_the_watch_is_left_alone(world: World) -> None:
    world.kube.put(cr(deletionTimestamp="2024-01-01T00:00:00Z", finalizers=["someone.else/x"]))
    before = world.kube.stored()
    assert world.reconcile() == Outcome(succeeded=True)
    assert world.executor.requests == []
    assert world.kube.stored() == before
    assert world.recorder.events == []


def test_a_deleting_object_without_our_finalizer_is_left_alone(world: World) -> None:
    world.kube.put(cr(deletionTimestamp="2024-01-01T00:00:00Z", finalizers=["someone.else/x"]))
    before = world.kube.stored()
    assert world.reconcile(watch(finalizer=Finalizer(FINALIZER, None))) == Outcome(succeeded=True)
    assert world.executor.requests == []
    assert world.kube.stored() == before


# -- before the run -------------------------------------------------------------------------------------


def test_the_finalizer_is_added_before_the_first_run(world: World) -> None:
    world.kube.put(cr(finalizers=["someone.else/x"]))
    world.reconcile(watch(finalizer=Finalizer(FINALIZER, None)))
    [seen] = world.executor.seen
    assert seen["metadata"]["finalizers"] == ["someone.else/x", FINALIZER]
    assert world.executor.requests[0].obj["metadata"]["finalizers"] == ["someone.else/x", FINALIZER]
    assert world.kube.stored()["metadata"]["finalizers"] == ["someone.else/x", FINALIZER]


def test_a_finalizer_already_there_is_not_patched_again(world: World) -> None:
    world.kube.put(cr(finalizers=[FINALIZER]))
    world.reconcile(watch(finalizer=Finalizer(FINALIZER, None)))
    assert [sub for sub, _ in world.kube.patches] == ["status", "status"]  # Running, then the result


def test_running_is_written_before_the_run_on_a_new_generation(world: World) -> None:
    world.kube.put(cr(generation=2, status={"observedGeneration": 1}))
    world.reconcile()
    [seen] = world.executor.seen
    running = conditions(seen)["Running"]
    assert (running["status"], running["reason"], running["observedGeneration"]) == ("True", "Running", 2)


def test_running_is_not_written_again_for_a_generation_already_observed(world: World) -> None:
    world.kube.put(cr(generation=2, status={"observedGeneration": 2}))
    world.reconcile()
    assert len(world.kube.patches) == 1  # only the result
    assert "conditions" not in world.executor.seen[0]["status"]


def test_without_manage_status_there_is_no_running_and_no_observed_generation(world: World) -> None:
    world.kube.put(cr(generation=2))
    world.executor.results = [RunResult(run_id="r", ok=1, status={"phase": "Ready"})]
    world.reconcile(watch(manage_status=False))
    assert "status" not in world.executor.seen[0]
    assert world.kube.stored()["status"] == {"phase": "Ready"}


def test_the_run_request_carries_the_watch_and_the_object(world: World) -> None:
    world.kube.put(cr(annotations={"ansible.sdk.operatorframework.io/verbosity": "4"}))
    world.reconcile()
    [request] = world.executor.requests
    assert (request.group, request.version, request.kind) == ("cache.example.com", "v1alpha1", "Memcached")
    assert request.role == "memcached"
    assert request.watch_vars == {"from_watch": 1}
    assert request.finalizer_vars is None
    assert request.verbosity == 4
    assert request.obj["spec"] == {"size": 1}
    owner = json.loads(request.env[OWNER_ENV])
    assert owner == {
        "api_version": "cache.example.com/v1alpha1",
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "name": "mc",
        "namespace": "ns",
        "uid": "uid-1",
    }
    assert "KUBECONFIG" not in request.env  # no proxy, no per-run kubeconfig


# -- after the run --------------------------------------------------------------------------------------


def test_a_successful_run_writes_the_status_and_role_events(world: World) -> None:
    world.kube.put(cr(generation=3))
    world.executor.results = [
        RunResult(
            run_id="r",
            ok=4,
            changed=1,
            status={"nodes": ["a"]},
            events=[RoleEvent("Normal", "Scaled", "one node")],
        )
    ]
    outcome = world.reconcile()
    assert outcome == Outcome(succeeded=True)
    stored = world.kube.stored()
    assert stored["status"]["nodes"] == ["a"]
    assert stored["status"]["observedGeneration"] == 3
    conds = conditions(stored)
    assert (conds["Successful"]["status"], conds["Failure"]["status"]) == ("True", "False")
    assert conds["Running"]["ansibleResult"]["changed"] == 1
    assert world.recorder.events == [("Normal", "Scaled", "one node")]


def test_an_executor_that_hands_the_result_on_early_gets_the_status_written_before_it_returns(world: World) -> None:
    """The warm executor hands the result on before it writes the run's artifacts: the status, the role's
    Events and the outcome are those of an executor that does not, and the token is revoked once."""
    proxy = FakeProxy()
    reconciler = Reconciler(world.kube, world.executor, world.recorder, proxy)  # type: ignore[arg-type]
    result = RunResult(run_id="r", ok=2, status={"nodes": ["b"]}, events=[RoleEvent("Normal", "Scaled", "two")])
    outcomes, stored = [], []
    try:
        for hands_on in (False, True):
            world.kube.put(cr(generation=3))
            world.executor.hands_on, world.executor.results = hands_on, [dataclasses.replace(result)]
            outcomes.append(reconciler.reconcile(KEY, world.ctx()))
            stored.append(world.kube.stored()["status"])
    finally:
        reconciler.close()
    assert outcomes[0] == outcomes[1] == Outcome(succeeded=True)
    assert stored[0]["nodes"] == stored[1]["nodes"] == ["b"]
    [held] = world.executor.after_hand_on
    assert held is not None and held["status"]["nodes"] == ["b"]  # written before run() returned
    assert conditions(held)["Successful"]["status"] == "True"
    assert world.recorder.events == [("Normal", "Scaled", "two")] * 2
    assert proxy.revoked == [r.run_id for r in world.executor.requests]  # once each


def test_a_status_write_that_fails_after_an_early_hand_on_is_raised(world: World) -> None:
    world.kube.put(cr(generation=2, status={"observedGeneration": 2}))
    world.executor.hands_on = True
    world.kube.fail_next_patch = [ApiError(503, "Unavailable")]
    with pytest.raises(ApiError) as raised:
        world.reconcile()
    assert raised.value.status == 503


def test_the_status_records_the_generation_the_run_saw(world: World) -> None:
    world.kube.put(cr(generation=3))

    def spec_changes() -> None:
        obj = world.kube.stored()
        obj["metadata"]["generation"] = 4
        world.kube.put(obj)

    world.executor.during = spec_changes
    world.reconcile()
    assert world.kube.stored()["status"]["observedGeneration"] == 3  # 4 gets a run of its own


@pytest.fixture
def frozen_wall_clock(monkeypatch: pytest.MonkeyPatch) -> float:
    now = 1_800_000_000.0
    monkeypatch.setattr(reconciling.time, "time", lambda: now)
    return now


@pytest.mark.parametrize(
    ("role_after", "period", "expected"),
    [(None, 0.0, None), (30.0, 0.0, 30.0), (None, 60.0, "resync"), (90.0, 60.0, "resync")],
)
def test_requeue_after_is_the_sooner_of_the_role_and_the_periodic_resync(
    world: World, frozen_wall_clock: float, role_after: float | None, period: float, expected: float | str | None
) -> None:
    world.kube.put(cr())
    world.executor.results = [RunResult(run_id="r", ok=1, requeue_after=role_after)]
    if expected == "resync":
        expected = resync_delay(KEY, period, frozen_wall_clock)
    assert world.reconcile(period=period) == Outcome(succeeded=True, requeue_after=expected)


def test_a_role_asking_sooner_than_the_resync_is_requeued_as_it_asked(world: World, frozen_wall_clock: float) -> None:
    world.kube.put(cr())
    world.executor.results = [RunResult(run_id="r", ok=1, requeue_after=1.5)]
    assert world.reconcile(period=3600.0).requeue_after == 1.5


@pytest.mark.parametrize("role_after", [0.0, 0.001, 0.999])
def test_a_requeue_under_a_second_is_raised_to_one_and_said_once(
    world: World, role_after: float, caplog: pytest.LogCaptureFixture
) -> None:
    world.kube.put(cr())
    world.executor.results = [RunResult(run_id=f"r{i}", ok=1, requeue_after=role_after) for i in range(3)]
    outcomes = [world.reconcile(period=0.0) for _ in range(3)]
    assert outcomes == [Outcome(succeeded=True, requeue_after=MIN_REQUEUE)] * 3
    said = [r for r in caplog.records if "the least allowed" in r.getMessage()]
    assert len(said) == 1 and said[0].fields["name"] == "mc"  # type: ignore[attr-defined]


def test_an_annotated_period_overrides_the_default(world: World, frozen_wall_clock: float) -> None:
    world.kube.put(cr(annotations={RECONCILE_PERIOD: "2m"}))
    assert world.reconcile(period=3600.0).requeue_after == resync_delay(KEY, 120.0, frozen_wall_clock)


def test_a_failed_run_writes_failure_warns_and_retries(world: World) -> None:
    world.kube.put(cr(generation=2))
    world.executor.results = [failed()]
    outcome = world.reconcile(period=60.0)
    assert outcome == Outcome(succeeded=False, retry=True, reason="Failed")
    failure = conditions(world.kube.stored())["Failure"]
    assert (failure["status"], failure["reason"]) == ("True", "Failed")
    assert failure["message"] == "memcached : Create: quota exceeded"
    assert world.recorder.events == [("Warning", "Failed", "memcached : Create: quota exceeded")]


def test_a_failed_run_is_reported_with_the_roles_own_failure_reason(world: World) -> None:
    world.kube.put(cr())
    own = {"type": "Failure", "status": "True", "reason": "ErrResourceExists", "message": "not managed by us"}
    world.executor.results = [RunResult(run_id="r", failures=1, conditions=[own])]
    world.reconcile()
    assert world.recorder.events == [("Warning", "ErrResourceExists", "not managed by us")]
    assert conditions(world.kube.stored())["Failure"]["reason"] == "ErrResourceExists"


def test_a_success_after_a_failure_is_announced_once(world: World) -> None:
    world.kube.put(cr())
    world.executor.results = [failed(), RunResult(run_id="r2", ok=1), RunResult(run_id="r3", ok=1)]
    world.reconcile()
    world.reconcile()
    world.reconcile()
    assert [reason for _, reason, _ in world.recorder.events] == ["Failed", "Recovered"]
    assert world.recorder.events[1][0] == "Normal"


def test_an_object_deleted_during_the_run_gets_no_status(world: World) -> None:
    world.kube.put(cr())
    world.executor.during = lambda: world.kube.delete("ns", "mc")
    world.executor.results = [failed()]
    assert world.reconcile() == Outcome(succeeded=False, reason="Failed")
    assert world.recorder.events == []


def test_deletion_started_during_the_run_runs_the_finalizer_at_once(world: World) -> None:
    world.kube.put(cr())

    def deleted() -> None:
        obj = world.kube.stored()
        obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        world.kube.put(obj)

    world.executor.during = deleted
    outcome = world.reconcile(watch(finalizer=Finalizer(FINALIZER, None)), period=600.0)
    assert outcome == Outcome(succeeded=True, requeue_after=0)


# -- finalizer runs -------------------------------------------------------------------------------------


def deleting_with_finalizer(world: World) -> None:
    world.kube.put(
        cr(deletionTimestamp="2024-01-01T00:00:00Z", finalizers=["someone.else/x", FINALIZER], status={"a": 1})
    )


def test_a_successful_finalizer_run_removes_only_our_finalizer(world: World) -> None:
    deleting_with_finalizer(world)
    cleanup = Finalizer(FINALIZER, Target(role="cleanup"), {"state": "absent"})
    world.executor.results = [RunResult(run_id="r", ok=1, events=[RoleEvent("Normal", "Cleaned", "bye")])]
    assert world.reconcile(watch(finalizer=cleanup)) == Outcome(succeeded=True)
    [request] = world.executor.requests
    assert request.role == "cleanup"
    assert request.finalizer_vars == {"state": "absent"}
    stored = world.kube.stored()
    assert stored["metadata"]["finalizers"] == ["someone.else/x"]
    assert stored["status"] == {"a": 1}  # no Running, no final status on the way out
    assert [sub for sub, _ in world.kube.patches] == [None]
    assert world.recorder.events == [("Normal", "Cleaned", "bye")]


def test_a_finalizer_without_a_target_runs_the_watchs_own(world: World) -> None:
    deleting_with_finalizer(world)
    world.reconcile(watch(finalizer=Finalizer(FINALIZER, None, {"state": "absent"})))
    [request] = world.executor.requests
    assert request.role == "memcached"
    assert request.finalizer_vars == {"state": "absent"}


def test_the_last_finalizer_removed_leaves_none(world: World) -> None:
    world.kube.put(cr(deletionTimestamp="2024-01-01T00:00:00Z", finalizers=[FINALIZER]))
    world.reconcile(watch(finalizer=Finalizer(FINALIZER, None)))
    assert "finalizers" not in world.kube.stored()["metadata"]


def test_a_failed_finalizer_run_keeps_the_finalizer_and_retries(world: World) -> None:
    deleting_with_finalizer(world)
    world.executor.results = [failed()]
    outcome = world.reconcile(watch(finalizer=Finalizer(FINALIZER, None)))
    assert outcome == Outcome(succeeded=False, retry=True, reason="Failed")
    assert FINALIZER in world.kube.stored()["metadata"]["finalizers"]
    assert ("Warning", "Failed", "memcached : Create: quota exceeded") in world.recorder.events


# -- writing the status ---------------------------------------------------------------------------------


def test_a_conflicting_status_write_is_recomputed_from_the_fresh_object(world: World) -> None:
    world.kube.put(cr(generation=2, status={"observedGeneration": 2}))
    world.kube.fail_next_patch = [ApiError(409, "Conflict")]
    assert world.reconcile().succeeded
    assert conditions(world.kube.stored())["Successful"]["status"] == "True"


def counted_reads(world: World) -> list[int]:
    """How many times the reconciler reads the object from the API server (one entry per read)."""
    reads: list[int] = []
    world.kube.on_get = lambda: reads.append(1)
    return reads


def test_a_run_that_left_its_object_alone_gets_its_status_without_a_read(world: World) -> None:
    world.kube.put(cr(generation=2, status={"observedGeneration": 2}))
    reads = counted_reads(world)
    assert world.reconcile().succeeded
    assert conditions(world.kube.stored())["Successful"]["status"] == "True"
    assert reads == []  # the watch's copy is the object: the status patch checks its resourceVersion


def test_a_cache_behind_a_change_made_during_the_run_costs_one_conflict_and_one_read(world: World) -> None:
    world.kube.put(cr(generation=1))
    stale = world.kube.stored()
    world.cache = lambda ns, name: copy.deepcopy(stale)  # the watch never catches up during this test

    def labelled() -> None:
        obj = world.kube.stored()
        obj["metadata"]["labels"] = {"changed": "during-the-run"}
        world.kube.put(obj)

    world.executor.during = labelled
    reads = counted_reads(world)
    assert world.reconcile().succeeded
    stored = world.kube.stored()
    assert conditions(stored)["Successful"]["status"] == "True"
    assert stored["metadata"]["labels"] == {"changed": "during-the-run"}
    assert reads == [1]


def test_an_object_made_again_under_its_name_during_the_run_gets_no_status(world: World) -> None:
    world.kube.put(cr())

    def made_again() -> None:
        world.kube.delete("ns", "mc")
        world.kube.put(cr(uid="uid-2"))

    world.executor.during = made_again
    assert world.reconcile().succeeded
    assert "status" not in world.kube.stored()  # the new object is not the one the run reconciled
    assert world.recorder.events == []


def test_an_object_the_watch_no_longer_holds_is_read_before_its_status(world: World) -> None:
    world.kube.put(cr(generation=2, status={"observedGeneration": 2}))
    held = {"yes": True}
    world.cache = lambda ns, name: world.kube.stored(ns, name) if held["yes"] else None
    world.executor.during = lambda: held.update(yes=False)  # e.g. its labels left the watch's selector
    reads = counted_reads(world)
    assert world.reconcile().succeeded
    assert conditions(world.kube.stored())["Successful"]["status"] == "True"
    assert reads == [1]


def test_a_status_that_keeps_conflicting_is_a_temporary_error(world: World) -> None:
    world.kube.put(cr(generation=2, status={"observedGeneration": 2}))
    world.kube.fail_next_patch = [ApiError(409, "Conflict")] * 4
    with pytest.raises(TemporaryError, match="conflicting"):
        world.reconcile()


def test_another_api_error_on_the_status_is_raised(world: World) -> None:
    world.kube.put(cr(generation=2, status={"observedGeneration": 2}))
    world.kube.fail_next_patch = [ApiError(503, "Unavailable")]
    with pytest.raises(ApiError) as raised:
        world.reconcile()
    assert raised.value.status == 503


def test_a_requeue_before_the_watch_caught_up_sees_our_own_write(world: World) -> None:
    world.kube.put(cr(generation=2))
    stale = world.kube.stored()  # what the watch's cache still holds after our writes
    world.cache = lambda ns, name: copy.deepcopy(stale)
    world.reconcile()
    patches = len(world.kube.patches)
    world.reconcile()
    # Running again would mean the second run started from the status before our own write.
    assert len(world.kube.patches) == patches + 1
    assert "Running reconciliation" not in json.dumps(world.kube.patches[-1])


def test_our_own_writes_are_forgotten_once_no_watch_can_still_be_behind_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With thousands of objects at rest, the reconciler must not hold a second copy of each."""
    now = [1000.0]
    monkeypatch.setattr(ownwrites.time, "monotonic", lambda: now[0])
    world.kube.put(cr(generation=2))
    stale = world.kube.stored()
    world.cache = lambda ns, name: copy.deepcopy(stale)
    world.reconcile()
    own = world.reconciler._own
    written = own.stored(KEY)
    assert isinstance(written, bytes) and b"managedFields" not in written  # compact, and without them
    now[0] += ownwrites.TTL + 1
    own.remember(Key(KEY.gvk, "ns", "other"), {"metadata": {"name": "other"}})
    assert own.keys() == [Key(KEY.gvk, "ns", "other")]
    now[0] += ownwrites.TTL + 1
    world.reconciler.tidy()  # at rest, with no write to sweep them, an idle worker's call does
    assert own.keys() == []


def test_a_cache_that_caught_up_wins_over_our_older_write(world: World) -> None:
    world.kube.put(cr(generation=2))
    world.reconcile()
    newer = world.kube.stored()
    newer["metadata"]["generation"] = 3  # someone changed the spec after our write
    world.kube.put(newer)
    world.reconcile()
    assert world.executor.requests[-1].obj["metadata"]["generation"] == 3


# -- the per-run kubeconfig for the proxy ----------------------------------------------------------------


def test_each_run_gets_a_private_kubeconfig_revoked_and_removed_when_it_ends(world: World) -> None:
    proxy = FakeProxy()
    reconciler = Reconciler(world.kube, world.executor, world.recorder, proxy)  # type: ignore[arg-type]
    modes: list[int] = []
    world.executor.during = lambda: modes.append(
        stat.S_IMODE(os.stat(world.executor.requests[-1].env["KUBECONFIG"]).st_mode)
    )
    world.kube.put(cr())
    try:
        reconciler.reconcile(KEY, world.ctx())
        [request] = world.executor.requests
        assert not Path(request.env["KUBECONFIG"]).exists()  # gone at once, not only at close()
    finally:
        reconciler.close()
    assert request.env["K8S_AUTH_KUBECONFIG"] == request.env["KUBECONFIG"]
    assert world.executor.kubeconfigs == [f"token-for-{request.run_id}"]
    assert modes == [0o600]
    assert proxy.granted[request.run_id] == Owner("cache.example.com/v1alpha1", "Memcached", "mc", "ns", "uid-1")
    assert proxy.revoked == [request.run_id]


@pytest.mark.parametrize(
    ("confine", "extra", "reach"),
    [(False, frozenset(), ANYWHERE), (True, frozenset(), Reach(frozenset({"ns"}))), (True, {"ops"}, None)],
)
def test_a_run_reaches_what_run_namespaces_says(
    world: World, confine: bool, extra: frozenset[str], reach: Reach | None
) -> None:
    proxy = FakeProxy()
    reconciler = Reconciler(world.kube, world.executor, world.recorder, proxy)  # type: ignore[arg-type]
    world.kube.put(cr())
    ctx = dataclasses.replace(
        world.ctx(dataclasses.replace(watch(), run_namespaces=frozenset(extra))), confine_runs=confine
    )
    try:
        reconciler.reconcile(KEY, ctx)
    finally:
        reconciler.close()
    [request] = world.executor.requests
    assert proxy.reach[request.run_id] == (reach or Reach(frozenset({"ns", "ops"})))


def test_a_crashed_run_still_revokes_its_token_and_removes_its_kubeconfig(world: World) -> None:
    proxy = FakeProxy()
    reconciler = Reconciler(world.kube, world.executor, world.recorder, proxy)  # type: ignore[arg-type]
    world.executor.error = RuntimeError("executor died")
    world.kube.put(cr())
    try:
        with pytest.raises(RuntimeError):
            reconciler.reconcile(KEY, world.ctx())
        [request] = world.executor.requests
        assert not Path(request.env["KUBECONFIG"]).exists()
    finally:
        reconciler.close()
    assert proxy.revoked == [request.run_id]


# -- report and rehearse --------------------------------------------------------------------------------


def test_report_says_it_on_the_object_with_a_bounded_message(world: World) -> None:
    world.kube.put(cr())
    world.reconciler.report(KEY, world.ctx(), "RoleMissing", "x" * 5000)
    failure = conditions(world.kube.stored())["Failure"]
    assert failure["reason"] == "RoleMissing"
    assert len(failure["message"]) == 1000 and failure["message"].endswith("...")
    [(event_type, reason, message)] = world.recorder.events
    assert (event_type, reason, message) == ("Warning", "RoleMissing", failure["message"])


def test_report_on_a_status_it_cannot_write_still_records_the_event(world: World) -> None:
    world.kube.put(cr())
    world.kube.fail_next_patch = [ApiError(403, "Forbidden")]
    world.reconciler.report(KEY, world.ctx(), "RoleMissing", "no role")
    assert world.recorder.events == [("Warning", "RoleMissing", "no role")]
    assert "status" not in world.kube.stored()


def test_report_on_an_object_gone_does_nothing(world: World) -> None:
    world.reconciler.report(KEY, world.ctx(), "RoleMissing", "no role")
    assert world.recorder.events == []


def test_rehearse_runs_and_returns_the_status_writing_nothing(world: World) -> None:
    obj = cr(generation=5)
    world.executor.results = [RunResult(run_id="r", ok=1, status={"phase": "Ready"})]
    rehearsal = world.reconciler.rehearse(KEY, world.ctx(watch(finalizer=Finalizer(FINALIZER, None))), obj)
    assert rehearsal.result is not None and rehearsal.result.succeeded
    assert rehearsal.status["phase"] == "Ready"
    assert rehearsal.status["observedGeneration"] == 5
    assert rehearsal.refused == ""
    assert world.kube.patches == [] and world.recorder.events == []
    assert "finalizers" not in world.executor.requests[0].obj["metadata"]


def test_rehearse_of_a_refused_object_returns_the_failure_without_a_run(world: World) -> None:
    rehearsal = world.reconciler.rehearse(KEY, world.ctx(), cr(spec={"omit": 1}))
    assert rehearsal.result is None
    assert rehearsal.refused == "InvalidSpec"
    assert conditions({"status": rehearsal.status})["Failure"]["status"] == "True"
    assert world.executor.requests == []


# -- the record of skipConvergedAtStart ------------------------------------------------------------------------


def recording(world: World, answer: Any) -> tuple[KindContext, list[tuple[Key, int, bool]]]:
    """A kind context whose record function answers ``answer`` and notes what it was asked."""
    asked: list[tuple[Key, int, bool]] = []
    ctx = world.ctx()

    def record(key: Key, obj: KubeObject, succeeded: bool) -> Any:
        asked.append((key, obj["metadata"]["generation"], succeeded))
        return answer

    ctx.record = record
    return ctx, asked


def test_a_successful_run_writes_its_record_with_its_status(world: World) -> None:
    world.kube.put(cr(generation=4))
    ctx, asked = recording(world, {"generation": 4, "content": "c"})
    world.reconciler.reconcile(KEY, ctx)
    assert asked == [(KEY, 4, True)]
    assert world.kube.stored()["status"][RECORD] == {"generation": 4, "content": "c"}
    assert world.kube.stored()["status"]["observedGeneration"] == 4


def test_a_failed_run_removes_the_record(world: World) -> None:
    world.kube.put(cr(generation=4, status={RECORD: {"generation": 4}}))
    world.executor.results = [failed()]
    ctx, asked = recording(world, None)
    world.reconciler.reconcile(KEY, ctx)
    assert asked == [(KEY, 4, False)]
    assert RECORD not in world.kube.stored()["status"]


def test_without_the_option_the_status_carries_no_record(world: World) -> None:
    world.kube.put(cr(generation=4, status={RECORD: {"generation": 3}}))
    world.reconcile()
    assert world.kube.stored()["status"][RECORD] == {"generation": 3}  # left as it was: nobody reads it
