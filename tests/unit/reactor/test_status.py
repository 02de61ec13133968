"""RunResult -> status patch: operator-sdk's conditions, ansibleResult, observedGeneration, timestamps."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hybrid_operator.ansible.results import FailedTask, RunResult
from hybrid_operator.reactor import status as status_mod
from hybrid_operator.reactor.status import (
    error_status,
    failure_reason,
    final_status,
    last_failed,
    running_status,
)

STAMP = "2030-01-01T00:00:00Z"
OLD = "2020-01-01T00:00:00Z"


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(status_mod, "now", lambda: STAMP)


def cr(generation: int = 3, conditions: list[dict[str, Any]] | None = None, **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "web", "namespace": "shop", "generation": generation}}
    if conditions is not None or status:
        obj["status"] = {**status, "conditions": conditions or []}
    return obj


def by_type(patch: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in patch["conditions"]}


def success(**fields: Any) -> RunResult:
    return RunResult(run_id="r", ok=5, changed=2, skipped=1, **fields)


def failure(**fields: Any) -> RunResult:
    tasks = [FailedTask(task="memcached : Create", message="quota exceeded", output="")]
    return RunResult(run_id="r", ok=3, failures=1, failed_tasks=tasks, **fields)


def test_success_conditions() -> None:
    patch = final_status(cr(), success(), manage_status=True)
    conds = by_type(patch)
    assert conds["Running"] == {
        "type": "Running",
        "status": "True",
        "reason": "Successful",
        "message": "Awaiting next reconciliation",
        "observedGeneration": 3,
        "lastTransitionTime": STAMP,
        "ansibleResult": {"ok": 5, "changed": 2, "skipped": 1, "failures": 0, "completion": STAMP},
    }
    assert conds["Successful"] == {
        "type": "Successful",
        "status": "True",
        "reason": "Successful",
        "message": "Last reconciliation succeeded",
        "observedGeneration": 3,
        "lastTransitionTime": STAMP,
    }
    assert conds["Failure"]["status"] == "False"
    assert "ansibleResult" not in conds["Failure"]
    assert patch["observedGeneration"] == 3


def test_failure_conditions() -> None:
    obj = cr(
        conditions=[{"type": "Running", "status": "True", "reason": "Running", "message": "Running reconciliation"}]
    )
    patch = final_status(obj, failure(), manage_status=True)
    conds = by_type(patch)
    assert conds["Failure"] == {
        "type": "Failure",
        "status": "True",
        "reason": "Failed",
        "message": "memcached : Create: quota exceeded",
        "observedGeneration": 3,
        "lastTransitionTime": STAMP,
        "ansibleResult": {"ok": 3, "changed": 0, "skipped": 0, "failures": 1, "completion": STAMP},
    }
    assert conds["Successful"]["status"] == "False"
    assert conds["Running"]["status"] == "False"
    assert "ansibleResult" not in conds["Running"]
    assert patch["observedGeneration"] == 3


def test_failure_after_a_success_leaves_nothing_stale_on_running() -> None:
    earlier = final_status(cr(), success(), manage_status=True)
    patch = final_status(cr(conditions=earlier["conditions"]), failure(), manage_status=True)
    running = by_type(patch)["Running"]
    assert running["status"] == "False"
    assert "ansibleResult" not in running
    assert running["reason"] != "Successful"


def test_failure_without_a_running_condition_adds_none() -> None:
    patch = final_status(cr(), failure(), manage_status=True)
    assert set(by_type(patch)) == {"Failure", "Successful"}


def test_transition_time_kept_while_status_unchanged() -> None:
    obj = cr(
        conditions=[
            {"type": "Running", "status": "True", "reason": "Successful", "lastTransitionTime": OLD},
            {"type": "Successful", "status": "True", "reason": "Successful", "lastTransitionTime": OLD},
            {"type": "Failure", "status": "False", "lastTransitionTime": OLD},
        ]
    )
    conds = by_type(final_status(obj, success(), manage_status=True))
    assert {t: c["lastTransitionTime"] for t, c in conds.items()} == {
        "Running": OLD,
        "Successful": OLD,
        "Failure": OLD,
    }


def test_transition_time_moves_when_status_flips() -> None:
    obj = cr(
        conditions=[
            {"type": "Successful", "status": "False", "lastTransitionTime": OLD},
            {"type": "Failure", "status": "True", "reason": "Failed", "lastTransitionTime": OLD},
        ]
    )
    conds = by_type(final_status(obj, success(), manage_status=True))
    assert conds["Successful"]["lastTransitionTime"] == STAMP
    assert conds["Failure"]["lastTransitionTime"] == STAMP
    assert conds["Failure"]["status"] == "False"


def test_role_status_keys_and_other_conditions_are_kept() -> None:
    obj = cr(conditions=[{"type": "Ready", "status": "True", "lastTransitionTime": OLD}], phase="Old")
    result = success(status={"phase": "Ready", "endpoint": "web.shop.svc"})
    patch = final_status(obj, result, manage_status=True)
    assert patch["phase"] == "Ready"
    assert patch["endpoint"] == "web.shop.svc"
    assert by_type(patch)["Ready"] == {"type": "Ready", "status": "True", "lastTransitionTime": OLD}


def test_role_set_failure_condition_wins_over_ours() -> None:
    role_failure = {
        "type": "Failure",
        "status": "True",
        "reason": "ErrResourceExists",
        "message": "Resource web exists and is not managed by Memcached",
    }
    result = failure(conditions=[role_failure])
    conds = by_type(final_status(cr(), result, manage_status=True))
    assert conds["Failure"]["reason"] == "ErrResourceExists"
    assert conds["Failure"]["message"] == "Resource web exists and is not managed by Memcached"
    assert conds["Successful"]["status"] == "False"  # ours still set for the types the role left alone
    assert failure_reason(result) == "ErrResourceExists"


def test_manage_status_false_writes_no_runtime_conditions() -> None:
    obj = cr()
    assert final_status(obj, success(status={"phase": "Ready"}), manage_status=False) == {"phase": "Ready"}
    assert final_status(obj, failure(), manage_status=False) == {}


def test_manage_status_false_still_writes_the_roles_conditions() -> None:
    result = success(conditions=[{"type": "Ready", "status": "True"}])
    patch = final_status(cr(), result, manage_status=False)
    assert patch == {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": STAMP}]}


def test_object_without_generation_gets_no_observed_generation() -> None:
    obj = {"metadata": {"name": "web"}}
    patch = final_status(obj, success(), manage_status=True)
    assert "observedGeneration" not in patch
    assert all("observedGeneration" not in c for c in patch["conditions"])


def test_final_status_does_not_modify_the_object() -> None:
    obj = cr(conditions=[{"type": "Running", "status": "True", "lastTransitionTime": OLD}])
    before = copy.deepcopy(obj)
    final_status(obj, failure(conditions=[{"type": "Ready", "status": "False"}]), manage_status=True)
    assert obj == before


def test_running_status_on_a_new_generation() -> None:
    obj = cr(
        generation=4,
        conditions=[
            {"type": "Successful", "status": "True", "reason": "Successful", "lastTransitionTime": OLD},
            {"type": "Ready", "status": "True", "lastTransitionTime": OLD},
        ],
    )
    conds = by_type(running_status(obj))
    assert conds["Running"] == {
        "type": "Running",
        "status": "True",
        "reason": "Running",
        "message": "Running reconciliation",
        "observedGeneration": 4,
        "lastTransitionTime": STAMP,
    }
    assert conds["Successful"]["status"] == "False"
    assert conds["Successful"]["lastTransitionTime"] == STAMP
    assert conds["Ready"]["lastTransitionTime"] == OLD


def test_running_status_on_a_first_run() -> None:
    assert set(by_type(running_status(cr()))) == {"Running"}


def test_error_status() -> None:
    obj = cr(conditions=[{"type": "Running", "status": "True", "lastTransitionTime": OLD}])
    conds = by_type(error_status(obj, "Unable to parse reconcile period annotation: 'soon'"))
    assert conds["Failure"]["status"] == "True"
    assert conds["Failure"]["reason"] == "Failed"
    assert conds["Failure"]["message"] == "Unable to parse reconcile period annotation: 'soon'"
    assert conds["Failure"]["observedGeneration"] == 3
    assert conds["Successful"]["status"] == "False"
    assert conds["Running"]["lastTransitionTime"] == OLD


def test_failure_reason_defaults_to_failed() -> None:
    assert failure_reason(failure()) == "Failed"
    assert failure_reason(failure(conditions=[{"type": "Failure", "status": "False", "reason": "Fine"}])) == "Failed"
    assert failure_reason(failure(conditions=[{"type": "Ready", "status": "True", "reason": "Up"}])) == "Failed"


@pytest.mark.parametrize(
    ("conditions", "failed"),
    [
        ([{"type": "Failure", "status": "True"}], True),
        ([{"type": "Failure", "status": "False"}], False),
        ([{"type": "Running", "status": "True"}], False),
        ([], False),
    ],
)
def test_last_failed(conditions: list[dict[str, Any]], failed: bool) -> None:
    assert last_failed(cr(conditions=conditions)) is failed


def test_last_failed_without_status() -> None:
    assert last_failed({"metadata": {}}) is False
    assert last_failed({"metadata": {}, "status": "garbage"}) is False


def test_a_failed_run_is_reported_in_the_roles_words_when_it_set_a_failure() -> None:
    task = FailedTask(task="foo : Stop without touching the Deployment", message="Resource web exists", output="")
    plain = RunResult(run_id="r", failures=1, failed_tasks=[task])
    assert status_mod.failure_text(plain) == "foo : Stop without touching the Deployment: Resource web exists"
    own = {"type": "Failure", "status": "True", "reason": "ErrResourceExists", "message": "Resource web exists"}
    with_condition = RunResult(run_id="r", failures=1, failed_tasks=[task], conditions=[own])
    assert status_mod.failure_text(with_condition) == "Resource web exists"


def test_the_verdict_on_a_failed_run_holds_all_the_reconciler_reports() -> None:
    own = {"type": "Failure", "status": "True", "reason": "ErrResourceExists", "message": "Resource web exists"}
    result = RunResult(run_id="r", failures=1, conditions=[own])
    before = cr(generation=3)
    verdict = status_mod.verdict(before, result, manage_status=True)
    assert (verdict.succeeded, verdict.reason, verdict.text) == (False, "ErrResourceExists", "Resource web exists")
    assert verdict.metric_reason == "ErrResourceExists"
    assert verdict.recovered is False
    fresher = cr(generation=4)  # the spec changed while the role ran: generation 3 is what was observed
    assert verdict.status(fresher) == final_status(fresher, result, manage_status=True, generation=3)


def test_the_verdict_on_a_success_after_a_failure_is_a_recovery() -> None:
    before = cr(conditions=[{"type": "Failure", "status": "True", "reason": "Failed"}])
    verdict = status_mod.verdict(before, success(), manage_status=False)
    assert (verdict.succeeded, verdict.reason, verdict.text, verdict.metric_reason) == (True, "", "", "")
    assert verdict.recovered is True
    assert verdict.status(before) == final_status(before, success(), manage_status=False, generation=3)
