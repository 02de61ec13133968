"""From a run's outcome to the custom resource's status: conditions, ansibleResult, observedGeneration.

Pure functions, called by ``reactor.reconciling`` with the freshest copy of the object and the run's
``RunResult``; the caller writes what they return as one merge patch on the status subresource. After a
run the reconciler asks once, ``verdict``, and gets all it reports: the status patch (``Verdict.status``,
recomputed on the freshest copy after a write conflict), the Warning Event's reason and text, the reason
the failure counts under in the metrics, and whether the run is a recovery from an earlier failure.
Conditions and reasons are operator-sdk's (Running / Successful / Failure; reasons Running, Successful,
Failed; ``ansibleResult`` on the Running or Failure condition), plus what upstream lacks:
``observedGeneration`` on the status and on each condition, and ``lastTransitionTime`` that moves only
when a condition's status flips. Conditions a role set itself (through ``k8s_status``) win over ours
for the same type, so a role can report ``Failure`` with its own reason (e.g. ``ErrResourceExists``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hybrid_operator.ansible.results import RunResult
from hybrid_operator.kube.objects import conditions_of, generation_of

RUNNING, SUCCESSFUL, FAILURE = "Running", "Successful", "Failure"
REASON_RUNNING, REASON_SUCCESSFUL, REASON_FAILED = "Running", "Successful", "Failed"
MSG_RUNNING = "Running reconciliation"
MSG_AWAITING = "Awaiting next reconciliation"
MSG_SUCCEEDED = "Last reconciliation succeeded"
REASON_TIMED_OUT = "RunTimedOut"  # the failure reason a run stopped at --run-timeout counts under
_LABEL_REASON = re.compile(r"[A-Z][A-Za-z0-9]{0,62}")

Condition = dict[str, Any]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(obj: Mapping[str, Any]) -> list[Condition]:
    return [dict(c) for c in conditions_of(obj) if c.get("type")]


def set_condition(conditions: Sequence[Condition], new: Condition, stamp: str) -> list[Condition]:
    """Replace the condition of the same type; keep lastTransitionTime unless the status flips."""
    old = next((c for c in conditions if c.get("type") == new["type"]), None)
    merged = dict(new)
    if old is not None and old.get("status") == new.get("status") and old.get("lastTransitionTime"):
        merged["lastTransitionTime"] = old["lastTransitionTime"]
    else:
        merged["lastTransitionTime"] = stamp
    out = [c for c in conditions if c.get("type") != new["type"]]
    out.append(merged)
    return out


def _condition(ctype: str, status: str, reason: str, message: str, generation: Any) -> Condition:
    cond: Condition = {"type": ctype, "status": status, "reason": reason, "message": message}
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond


def running_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Status patch at the start of a run on a new generation: Running=True, Successful=False."""
    stamp = now()
    generation = generation_of(obj)
    conditions = _conditions(obj)
    successful = next((c for c in conditions if c["type"] == SUCCESSFUL), None)
    if successful is not None:
        conditions = set_condition(conditions, {**successful, "status": "False"}, stamp)
    conditions = set_condition(conditions, _condition(RUNNING, "True", REASON_RUNNING, MSG_RUNNING, generation), stamp)
    return {"conditions": conditions}


def ansible_result(result: RunResult, stamp: str) -> dict[str, Any]:
    return {
        "ok": result.ok,
        "changed": result.changed,
        "skipped": result.skipped,
        "failures": result.failures,
        "completion": stamp,
    }


def final_status(
    obj: Mapping[str, Any], result: RunResult, *, manage_status: bool, generation: Any = None
) -> dict[str, Any]:
    """Status patch after a run: the role's keys and conditions, then ours unless manageStatus is off.

    ``obj`` is the freshest copy (to merge with); ``generation`` is the one the run saw, which is what
    was observed even if the spec changed while the role ran (that change gets its own run).
    """
    stamp = now()
    if generation is None:
        generation = generation_of(obj)
    patch: dict[str, Any] = dict(result.status)
    conditions = _conditions(obj)
    role_types = {c["type"] for c in result.conditions}
    for cond in result.conditions:
        conditions = set_condition(conditions, cond, stamp)
    if manage_status:
        for cond in _runtime_conditions(result, generation, stamp, conditions):
            if cond["type"] not in role_types:
                conditions = set_condition(conditions, cond, stamp)
        if generation is not None:
            patch["observedGeneration"] = generation
    if conditions != _conditions(obj) or result.conditions:
        patch["conditions"] = conditions
    return patch


def _runtime_conditions(
    result: RunResult, generation: Any, stamp: str, current: Sequence[Condition]
) -> list[Condition]:
    summary = ansible_result(result, stamp)
    if result.succeeded:
        running = _condition(RUNNING, "True", REASON_SUCCESSFUL, MSG_AWAITING, generation)
        running["ansibleResult"] = summary
        return [
            running,
            _condition(SUCCESSFUL, "True", REASON_SUCCESSFUL, MSG_SUCCEEDED, generation),
            _condition(FAILURE, "False", "", "", generation),
        ]
    failure = _condition(FAILURE, "True", REASON_FAILED, result.failure_message, generation)
    failure["ansibleResult"] = summary
    old_running = next((c for c in current if c.get("type") == RUNNING), None)
    out = [failure, _condition(SUCCESSFUL, "False", "", "", generation)]
    if old_running is not None:
        out.append(_condition(RUNNING, "False", REASON_FAILED, "Last reconciliation failed", generation))
    return out


@dataclass(frozen=True)
class Verdict:
    """A run's verdict: everything the reconciler writes and reports after it, worked out in one place."""

    result: RunResult
    manage_status: bool  # the watch's manageStatus: our conditions and observedGeneration, or the role's alone
    generation: Any  # the generation the run saw: what was observed, even if the spec changed meanwhile
    reason: str  # the Warning Event's reason: the role's own Failure reason, else Failed ("" on success)
    text: str  # the Warning Event's message ("" on success)
    metric_reason: str  # what the failure counts under in hybrid_operator_reconcile_failures_total
    recovered: bool  # a success after the object's status said its last run failed

    @property
    def succeeded(self) -> bool:
        return self.result.succeeded

    def status(self, fresh: Mapping[str, Any]) -> dict[str, Any]:
        """The status patch, merged with ``fresh`` (called again with a fresher copy after a conflict)."""
        return final_status(fresh, self.result, manage_status=self.manage_status, generation=self.generation)


def verdict(before: Mapping[str, Any], result: RunResult, *, manage_status: bool) -> Verdict:
    """The verdict on ``result``, a run of ``before`` (the object as the run saw it)."""
    failed = not result.succeeded
    return Verdict(
        result=result,
        manage_status=manage_status,
        generation=generation_of(before),
        reason=failure_reason(result) if failed else "",
        text=failure_text(result) if failed else "",
        metric_reason=metric_reason(result),
        recovered=not failed and last_failed(before),
    )


def metric_reason(result: RunResult) -> str:
    """The reason a failed run counts under in ``hybrid_operator_reconcile_failures_total`` ("" if it succeeded).

    A role may write any reason; a metric label must stay few and short, so one that is not a short
    CamelCase word counts as Failed.
    """
    if result.succeeded:
        return ""
    if result.timed_out:
        return REASON_TIMED_OUT
    reason = failure_reason(result)
    return reason if _LABEL_REASON.fullmatch(reason) else REASON_FAILED


def failure_reason(result: RunResult) -> str:
    """The reason to report a failed run with: the role's own Failure reason if it set one."""
    for cond in result.conditions:
        if cond.get("type") == FAILURE and cond.get("status") == "True" and cond.get("reason"):
            return str(cond["reason"])
    return REASON_FAILED


def failure_text(result: RunResult) -> str:
    """The message to report a failed run with: the role's own Failure message if it set one (its words,
    e.g. sample-controller's "Resource ... already exists and is not managed by Foo"), else each failed task
    with its message."""
    for cond in result.conditions:
        if cond.get("type") == FAILURE and cond.get("status") == "True" and cond.get("message"):
            return str(cond["message"])
    return result.failure_message


def error_status(obj: Mapping[str, Any], message: str, reason: str = REASON_FAILED) -> dict[str, Any]:
    """Failure=True for problems found before any run (a reserved spec key, an annotation out of bounds)."""
    stamp = now()
    generation = generation_of(obj)
    conditions = _conditions(obj)
    for cond in (
        _condition(FAILURE, "True", reason, message, generation),
        _condition(SUCCESSFUL, "False", "", "", generation),
    ):
        conditions = set_condition(conditions, cond, stamp)
    return {"conditions": conditions}


def last_failed(obj: Mapping[str, Any]) -> bool:
    """Whether the object's status says its last run failed (to announce a recovery)."""
    return any(c.get("type") == FAILURE and c.get("status") == "True" for c in _conditions(obj))
