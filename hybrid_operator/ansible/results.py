"""Reading a run's events into a ``RunResult``: counts, failed tasks, and what the role asked for.

Fed by the executors (``running``) with ansible-runner's event dicts, one at a time, as they arrive.
Roles ask for things through the ``hybrid_operator.util`` action plugins (``k8s_status``,
``requeue_after``, ``k8s_event``): their results carry a ``hybrid_operator`` key that is collected here,
so the reactor writes status and events once, after the run, instead of every task patching the API.
operator-sdk's own ``operator_sdk.util.requeue_after``, installed from Galaxy, is honoured the way its
Ansible operator does it: by the task's action name and the ``period`` in its result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator.ansible import apistatus

RESULT_KEY = "hybrid_operator"  # the key our action plugins put in their results
# Task actions whose ``period`` result operator-sdk's Ansible operator takes as a requeue request.
UPSTREAM_REQUEUE = ("operator_sdk.util.requeue_after", "requeue_after")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float | None:
    """Seconds in a Go duration ("90s", "1m30s", "1.5h"); None if it is not one."""
    text = text.strip()
    total, pos = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return total if text and pos == len(text) else None


@dataclass(frozen=True)
class FailedTask:
    task: str
    message: str
    output: str  # the human-readable lines Ansible printed for it


@dataclass(frozen=True)
class ToleratedFailure:
    """A task failure the role let pass: ``ignore_errors: true`` on the task, or a ``rescue`` that caught it.
    It does not fail the run, but operator-sdk logs it, and a person reading the log should see it."""

    task: str
    message: str
    how: str  # "ignore_errors" | "rescued"


MAX_FAILURE_MESSAGE = 1000  # as the reactor bounds the messages of failures found before a run
MAX_TOLERATED_KEPT = 10  # tolerated failures kept (and logged) per run; the rest are only counted
_MAX_TOLERATED_MESSAGE = 500  # characters of each one's message


@dataclass(frozen=True)
class RoleEvent:
    """An Event the role asked for on the object it reconciles."""

    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass
class RunResult:
    """What one reconcile run did: the executor's only output, whatever the backend."""

    run_id: str
    ok: int = 0
    changed: int = 0
    skipped: int = 0
    failures: int = 0
    unreachable: int = 0
    rc: int = 0
    timed_out: bool = False
    duration: float = 0.0
    failed_tasks: list[FailedTask] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)  # status keys the role set
    conditions: list[dict[str, Any]] = field(default_factory=list)  # conditions the role set
    events: list[RoleEvent] = field(default_factory=list)
    requeue_after: float | None = None
    error: str = ""  # the executor itself failed (could not start, crashed)
    tolerated: list[ToleratedFailure] = field(default_factory=list)  # the first MAX_TOLERATED_KEPT of them
    tolerated_count: int = 0  # all of them
    path: str = ""  # the warm executor's path for the run's tasks: lean, mixed or engine ("": not reported)
    loaded_ahead: bool = False  # the warm executor's zygote had loaded the run's playbook (``warm.plays``)

    @property
    def succeeded(self) -> bool:
        return not (self.failures or self.unreachable or self.timed_out or self.error or self.rc != 0)

    @property
    def failure_message(self) -> str:
        """One line a person can act on: each failed task with its message, or why the run itself failed;
        at most ``MAX_FAILURE_MESSAGE`` characters (it becomes a condition's message and an Event's)."""
        if self.failed_tasks:
            text = "; ".join(f"{t.task}: {t.message}" if t.task else t.message for t in self.failed_tasks)
            return text if len(text) <= MAX_FAILURE_MESSAGE else text[: MAX_FAILURE_MESSAGE - 3] + "..."
        if self.timed_out:
            return "the Ansible run timed out and was stopped"
        if self.error:
            return self.error
        if self.unreachable:
            return "localhost was unreachable"
        return f"the Ansible run exited with code {self.rc}"


class EventCollector:
    """Accumulates a RunResult from a run's events."""

    def __init__(self, run_id: str, listener: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.result = RunResult(run_id=run_id)
        self._stats_seen = False
        self._listener = listener  # sees every event as it arrives (``reconcile FILE`` prints them)
        # task uuid -> the message of its first failed loop item: from ansible-core 2.21 the items in the
        # task's final result no longer say which of them failed.
        self._item_failures: dict[str, str] = {}

    def add(self, event: dict[str, Any]) -> None:
        if self._listener is not None:
            self._listener(event)
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "runner_on_ok":
            res = data.get("res") or {}
            self._collect_requests(res)
            if data.get("task_action") in UPSTREAM_REQUEUE and RESULT_KEY not in res:
                self._upstream_requeue(res)
        elif kind == "runner_item_on_failed":
            message = (data.get("res") or {}).get("msg")
            if message and data.get("task_uuid"):
                self._item_failures.setdefault(str(data["task_uuid"]), str(message))
        elif kind == "runner_on_failed" and data.get("ignore_errors"):
            item_failure = self._item_failures.get(str(data.get("task_uuid") or ""), "")
            self._tolerate(_failed_task(data, "", item_failure), "ignore_errors")
        elif kind in ("runner_on_failed", "runner_on_unreachable"):
            item_failure = self._item_failures.get(str(data.get("task_uuid") or ""), "")
            self.result.failed_tasks.append(_failed_task(data, event.get("stdout", ""), item_failure))
        elif kind == "playbook_on_stats":
            self._stats(data)

    def _stats(self, data: dict[str, Any]) -> None:
        """The final counts; failed tasks of a run that failed none were rescued."""
        self._stats_seen = True
        result = self.result
        result.ok = _host_sum(data.get("ok"))
        result.changed = _host_sum(data.get("changed"))
        result.skipped = _host_sum(data.get("skipped"))
        result.failures = _host_sum(data.get("failures"))
        result.unreachable = _host_sum(data.get("dark"))
        if not result.failures and not result.unreachable:
            for task in result.failed_tasks:  # failures that were rescued do not count
                self._tolerate(task, "rescued")
            result.failed_tasks.clear()

    def _tolerate(self, task: FailedTask, how: str) -> None:
        self.result.tolerated_count += 1
        if len(self.result.tolerated) < MAX_TOLERATED_KEPT:
            message = task.message if len(task.message) <= _MAX_TOLERATED_MESSAGE else task.message[:497] + "..."
            self.result.tolerated.append(ToleratedFailure(task.task, message, how))

    def _collect_requests(self, res: dict[str, Any]) -> None:
        request = res.get(RESULT_KEY)
        if not isinstance(request, dict):
            return
        status = request.get("status")
        if isinstance(status, dict):
            self.result.status.update(status)
        for condition in request.get("conditions") or []:
            if isinstance(condition, dict) and condition.get("type"):
                self.result.conditions = [c for c in self.result.conditions if c.get("type") != condition["type"]] + [
                    condition
                ]
        event = request.get("event")
        if isinstance(event, dict) and event.get("reason"):
            self.result.events.append(
                RoleEvent(str(event.get("type", "Normal")), str(event["reason"]), str(event.get("message", "")))
            )
        after = request.get("requeue_after")
        if isinstance(after, int | float) and after >= 0:
            current = self.result.requeue_after
            self.result.requeue_after = after if current is None else min(current, after)

    def _upstream_requeue(self, res: dict[str, Any]) -> None:
        """operator-sdk's own ``operator_sdk.util.requeue_after`` (from Galaxy) returns a Go duration in
        ``period``; its Ansible operator reads it by the task's action name, and so do we."""
        after = parse_duration(str(res.get("period", "")))
        if after is not None:
            current = self.result.requeue_after
            self.result.requeue_after = after if current is None else min(current, after)

    @property
    def complete(self) -> bool:
        return self._stats_seen


def _failed_task(data: dict[str, Any], stdout: str, item_failure: str = "") -> FailedTask:
    res = data.get("res") or {}
    message = res.get("msg") or res.get("message") or res.get("stderr") or ""
    for item in res.get("results") or []:  # a loop says "One or more items failed": say which
        if isinstance(item, dict) and item.get("failed") and item.get("msg"):
            message = str(item["msg"])
            break
    else:
        message = item_failure or message
    message = apistatus.invalid_message(str(message)) or message  # a 422: the fields the API server named
    if res.get("_ansible_no_log") or res.get("censored"):
        message = "the task failed; its output is hidden by no_log"
    task = str(data.get("task") or "")
    name = f"{role} : {task}" if (role := _role_name(data.get("role"))) else task
    return FailedTask(task=name, message=str(message).strip() or f"task '{name}' failed", output=stdout.strip())


def _role_name(role: object) -> str:
    """The role as upstream's messages name it. watches.yaml's ``role`` reaches Ansible as an absolute path, and
    Ansible names a role by what the play said (``/opt/ansible/roles/memcached : Create ...``); upstream runs
    ``ansible-runner --role NAME --roles-path DIR``, so its tasks read ``memcached : Create ...``."""
    text = str(role or "").rstrip("/")
    return text.rsplit("/", 1)[-1] if text.startswith("/") else text


def _host_sum(per_host: object) -> int:
    if isinstance(per_host, dict):
        return sum(int(v) for v in per_host.values() if isinstance(v, int))
    return 0
