"""From ansible-runner events to a RunResult: counts, failed tasks, and what the role asked for."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_operator.ansible.results import (
    MAX_TOLERATED_KEPT,
    EventCollector,
    FailedTask,
    RoleEvent,
    RunResult,
    ToleratedFailure,
)


def ok(request: dict[str, Any] | None = None, **res: Any) -> dict[str, Any]:
    if request is not None:
        res["hybrid_operator"] = request
    return {"event": "runner_on_ok", "event_data": {"task": "a task", "host": "localhost", "res": res}}


def failed(
    res: dict[str, Any], *, task: str = "Create the Deployment", role: str | None = "memcached", **data: Any
) -> dict[str, Any]:
    event_data = {"task": task, "host": "localhost", "res": res, **data}
    if role:
        event_data["role"] = role
    return {
        "event": "runner_on_failed",
        "event_data": event_data,
        "stdout": f"fatal: [localhost]: FAILED! {res}\n",
    }


def stats(**counts: dict[str, int]) -> dict[str, Any]:
    return {"event": "playbook_on_stats", "event_data": counts}


def collect(*events: dict[str, Any]) -> RunResult:
    collector = EventCollector("run-1")
    for event in events:
        collector.add(event)
    return collector.result


def test_status_requests_merge() -> None:
    result = collect(
        ok({"status": {"phase": "Creating", "replicas": 1}}),
        ok({"status": {"phase": "Ready"}}),
    )
    assert result.status == {"phase": "Ready", "replicas": 1}


def test_conditions_merge_by_type_last_wins() -> None:
    result = collect(
        ok({"conditions": [{"type": "Ready", "status": "False"}, {"type": "Degraded", "status": "False"}]}),
        ok({"conditions": [{"type": "Ready", "status": "True", "reason": "AllUp"}]}),
        ok({"conditions": [{"status": "True"}, "not a condition"]}),  # no type: ignored
    )
    assert result.conditions == [
        {"type": "Degraded", "status": "False"},
        {"type": "Ready", "status": "True", "reason": "AllUp"},
    ]


def test_events_are_collected_in_order() -> None:
    result = collect(
        ok({"event": {"type": "Warning", "reason": "ScaledDown", "message": "from 3 to 1"}}),
        ok({"event": {"reason": "Created"}}),
        ok({"event": {"type": "Normal", "message": "no reason: ignored"}}),
    )
    assert result.events == [
        RoleEvent("Warning", "ScaledDown", "from 3 to 1"),
        RoleEvent("Normal", "Created", ""),
    ]


def test_smallest_requeue_after_wins() -> None:
    result = collect(ok({"requeue_after": 30}), ok({"requeue_after": 10.5}), ok({"requeue_after": 60}))
    assert result.requeue_after == 10.5


@pytest.mark.parametrize("bad", [-1, "30s", None])
def test_unusable_requeue_after_is_ignored(bad: Any) -> None:
    assert collect(ok({"requeue_after": bad})).requeue_after is None


def test_results_without_our_key_change_nothing() -> None:
    result = collect(ok(changed=True, msg="done"), ok({"status": "not a mapping"}))
    assert result.status == {}
    assert result.conditions == []
    assert result.events == []
    assert result.requeue_after is None


def test_stats_are_summed_over_hosts() -> None:
    result = collect(
        stats(
            ok={"localhost": 5, "other": 2},
            changed={"localhost": 1},
            skipped={"other": 3},
            failures={},
            dark={},
        )
    )
    assert (result.ok, result.changed, result.skipped, result.failures, result.unreachable) == (7, 1, 3, 0, 0)
    assert result.succeeded


def test_collector_is_complete_only_after_stats() -> None:
    collector = EventCollector("run-1")
    collector.add(ok())
    assert not collector.complete
    collector.add(stats(ok={"localhost": 1}))
    assert collector.complete


def test_failed_task_is_reported() -> None:
    result = collect(
        failed({"msg": "deployments.apps is forbidden"}),
        stats(ok={"localhost": 2}, failures={"localhost": 1}),
    )
    assert result.failed_tasks == [
        FailedTask(
            task="memcached : Create the Deployment",
            message="deployments.apps is forbidden",
            output="fatal: [localhost]: FAILED! {'msg': 'deployments.apps is forbidden'}",
        )
    ]
    assert not result.succeeded
    assert result.failure_message == "memcached : Create the Deployment: deployments.apps is forbidden"


@pytest.mark.parametrize(
    ("role", "shown"),
    [
        ("/opt/ansible/roles/memcached", "memcached"),  # watches.yaml's role, resolved to its path
        ("/tmp/project/roles/memcached/", "memcached"),
        ("memcached", "memcached"),
        ("kiali.operator.deploy", "kiali.operator.deploy"),  # a collection's role keeps its full name
        ("", ""),
    ],
)
def test_a_failed_task_names_its_role_as_upstream_does(role: str, shown: str) -> None:
    """Upstream runs ``ansible-runner --role NAME --roles-path DIR``: its tasks are ``NAME : task``, never the
    role's absolute path (which is how Ansible names a role the play gave by its path, as our wrapper does)."""
    result = collect(failed({"msg": "boom"}, role=role), stats(failures={"localhost": 1}))
    expected = f"{shown} : Create the Deployment" if shown else "Create the Deployment"
    assert [task.task for task in result.failed_tasks] == [expected]
    assert result.failure_message == f"{expected}: boom"
    tolerated = collect(failed({"msg": "boom"}, role=role, ignore_errors=True), stats(ok={"localhost": 1}))
    assert [t.task for t in tolerated.tolerated] == [expected]


def test_failed_task_with_ignore_errors_does_not_count() -> None:
    result = collect(
        failed({"msg": "ignored"}, ignore_errors=True), stats(ok={"localhost": 2}, ignored={"localhost": 1})
    )
    assert result.failed_tasks == []
    assert result.succeeded


def test_failed_then_rescued_clears_failed_tasks() -> None:
    result = collect(
        failed({"msg": "first try failed"}),
        ok(),
        stats(ok={"localhost": 3}, failures={"localhost": 0}, rescued={"localhost": 1}),
    )
    assert result.failed_tasks == []
    assert result.succeeded


def test_no_log_hides_the_message() -> None:
    censored = {
        "censored": "the output has been hidden due to the fact that 'no_log: true' was specified for this result",
        "changed": False,
    }
    result = collect(failed(censored), failed({"msg": "password=hunter2", "_ansible_no_log": True}))
    assert [t.message for t in result.failed_tasks] == ["the task failed; its output is hidden by no_log"] * 2
    assert "hunter2" not in result.failure_message


def test_message_falls_back_to_stderr_then_to_the_task_name() -> None:
    result = collect(
        failed({"stderr": "  boom\n"}, role=None, task="Run a script"), failed({}, role=None, task="Quiet")
    )
    assert [t.message for t in result.failed_tasks] == ["boom", "task 'Quiet' failed"]
    assert result.failed_tasks[0].task == "Run a script"


def test_loop_without_a_top_level_message_reports_the_failed_item() -> None:
    res = {
        "results": [
            {"failed": False, "msg": "fine", "item": 1},
            {"failed": True, "msg": "item 2 broke", "item": 2},
        ]
    }
    assert collect(failed(res)).failed_tasks[0].message == "item 2 broke"


def test_loop_failure_as_ansible_reports_it_names_the_failed_item() -> None:
    res = {
        "failed": True,
        "msg": "One or more items failed",
        "results": [
            {"failed": False, "msg": "fine", "item": 1},
            {"failed": True, "msg": "item 2 broke", "item": 2},
        ],
    }
    assert "item 2 broke" in collect(failed(res)).failed_tasks[0].message


def test_loop_failure_whose_items_do_not_say_which_failed_names_it_from_the_item_event() -> None:
    """ansible-core 2.21 drops ``failed`` from the items in the task's final result; the item's own
    ``runner_item_on_failed`` event still says what went wrong."""
    item = {
        "event": "runner_item_on_failed",
        "event_data": {"task_uuid": "t-1", "res": {"msg": "item 2 broke", "item": 2}},
    }
    res = {
        "msg": "One or more items failed",
        "results": [{"skip_reason": "Conditional result was False", "item": 1}, {"msg": "item 2 broke", "item": 2}],
    }
    other_task = failed({"msg": "One or more items failed", "results": []}, task_uuid="t-2")
    result = collect(item, failed(res, task_uuid="t-1"), other_task)
    assert [t.message for t in result.failed_tasks] == ["item 2 broke", "One or more items failed"]


def test_unreachable_counts_as_a_failed_task() -> None:
    unreachable = {
        "event": "runner_on_unreachable",
        "event_data": {"task": "Gather", "host": "localhost", "res": {"msg": "connection refused"}},
    }
    result = collect(unreachable, stats(dark={"localhost": 1}))
    assert result.unreachable == 1
    assert not result.succeeded
    assert result.failure_message == "Gather: connection refused"


def test_several_failed_tasks_are_joined() -> None:
    result = collect(failed({"msg": "one"}), failed({"msg": "two"}), stats(failures={"localhost": 2}))
    assert result.failure_message == "memcached : Create the Deployment: one; memcached : Create the Deployment: two"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"timed_out": True}, "the Ansible run timed out and was stopped"),
        (
            {"error": "ansible-runner could not start: no such file"},
            "ansible-runner could not start: no such file",
        ),
        ({"unreachable": 1}, "localhost was unreachable"),
        ({"rc": 2}, "the Ansible run exited with code 2"),
        ({"failures": 1}, "the Ansible run exited with code 0"),
    ],
)
def test_run_result_failure_without_failed_tasks(fields: dict[str, Any], message: str) -> None:
    result = RunResult(run_id="r", **fields)
    assert not result.succeeded
    assert result.failure_message == message


def test_run_result_defaults_succeed() -> None:
    assert RunResult(run_id="r").succeeded


def upstream(action: str, **res: Any) -> dict[str, Any]:
    return {"event": "runner_on_ok", "event_data": {"task": "t", "task_action": action, "res": res}}


@pytest.mark.parametrize(
    ("period", "seconds"), [("5s", 5.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("250ms", 0.25), ("2h0m1s", 7201.0)]
)
def test_upstreams_requeue_after_is_honoured(period: str, seconds: float) -> None:
    """operator-sdk's own operator_sdk.util.requeue_after (from Galaxy) answers with a Go duration."""
    assert collect(upstream("operator_sdk.util.requeue_after", period=period)).requeue_after == seconds
    assert collect(upstream("requeue_after", period=period)).requeue_after == seconds


@pytest.mark.parametrize("period", ["", "soon", "5", "-5s", "5s later", None])
def test_upstream_requeue_without_a_go_duration_is_ignored(period: Any) -> None:
    assert collect(upstream("operator_sdk.util.requeue_after", period=period)).requeue_after is None


def test_period_is_read_only_from_requeue_tasks_and_ours_wins() -> None:
    assert collect(upstream("ansible.builtin.debug", period="5s")).requeue_after is None
    ours = upstream("operator_sdk.util.requeue_after", period="5s", hybrid_operator={"requeue_after": 7})
    assert collect(ours).requeue_after == 7


def test_failures_the_role_lets_pass_are_kept_for_the_log() -> None:
    result = collect(
        failed({"msg": "no such ConfigMap"}, task="Read the optional settings", ignore_errors=True),
        failed({"msg": "first try failed"}, task="Try the fast path"),
        ok(),
        stats(ok={"localhost": 3}, ignored={"localhost": 1}, rescued={"localhost": 1}),
    )
    assert result.succeeded
    assert result.failed_tasks == []
    assert result.tolerated == [
        ToleratedFailure("memcached : Read the optional settings", "no such ConfigMap", "ignore_errors"),
        ToleratedFailure("memcached : Try the fast path", "first try failed", "rescued"),
    ]
    assert result.tolerated_count == 2


def test_tolerated_failures_are_bounded_then_counted() -> None:
    events = [failed({"msg": "x" * 5000}, task=f"check {i}", ignore_errors=True) for i in range(25)]
    result = collect(*events, stats(ok={"localhost": 25}, ignored={"localhost": 25}))
    assert len(result.tolerated) == MAX_TOLERATED_KEPT == 10
    assert result.tolerated_count == 25
    assert [t.task for t in result.tolerated] == [f"memcached : check {i}" for i in range(10)]
    assert all(len(t.message) <= 500 for t in result.tolerated)


def test_a_run_that_failed_keeps_its_failures_as_failures() -> None:
    result = collect(failed({"msg": "boom"}), stats(ok={"localhost": 1}, failures={"localhost": 1}))
    assert [t.message for t in result.failed_tasks] == ["boom"]
    assert result.tolerated == []
