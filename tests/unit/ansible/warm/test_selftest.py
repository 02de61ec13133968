"""The warm executor's self-test comparison: what counts as the same run, and what does not."""

from __future__ import annotations

from typing import Any

from hybrid_operator.ansible.warm import selftest


def event(counter: int, kind: str, task: str, res: dict[str, Any]) -> dict[str, Any]:
    return {"counter": counter, "event": kind, "event_data": {"task": task, "res": res}}


def run(token: str, **probe: Any) -> list[dict[str, Any]]:
    return [
        {"counter": 1, "event": "playbook_on_start", "event_data": {"uuid": token}},
        event(2, "runner_on_ok", "Template", {"ansible_facts": {"v": f"1,2/{token}"}}),
        event(3, "runner_on_ok", "Command", {"stdout": f"x {token}", "start": token, "delta": "0:00:00.1", "rc": 0}),
        event(4, "runner_on_ok", selftest.PROBE_TASK, {"data": 1, "warnings": ["w"], **probe}),
        {"counter": 5, "event": "playbook_on_stats", "event_data": {"ok": {"localhost": 3}, "uuid": token}},
    ]


def test_two_runs_that_differ_only_in_token_timing_and_process_are_the_same() -> None:
    verdict = selftest.compare(run("aaaa", warm_process=False), "aaaa", run("bbbb", warm_process=True), "bbbb")
    assert verdict.differences == []
    assert verdict.module_in_worker is True


def test_a_fork_that_kept_the_warm_ups_values_differs() -> None:
    stale = run("aaaa")  # the fork still saw the warm-up's extra vars
    verdict = selftest.compare(run("aaaa"), "aaaa", stale, "bbbb")
    assert verdict.differences and "Template" in verdict.differences[0]


def test_a_module_result_that_lost_its_warnings_differs() -> None:
    forked = run("bbbb")
    forked[3]["event_data"]["res"].pop("warnings")
    verdict = selftest.compare(run("aaaa"), "aaaa", forked, "bbbb")
    assert len(verdict.differences) == 1 and selftest.PROBE_TASK in verdict.differences[0]


def test_a_fork_that_ran_nothing_differs_and_so_does_an_empty_reference() -> None:
    assert selftest.compare(run("aaaa"), "aaaa", [], "bbbb").differences
    assert selftest.compare([], "aaaa", [], "bbbb").differences == ["the reference run reported no task results"]
    assert selftest.compare(run("aaaa"), "aaaa", [], "bbbb").module_in_worker is None


def test_the_playbook_has_a_module_a_collection_module_and_controller_side_tasks() -> None:
    import yaml

    (play,) = yaml.safe_load(selftest.PLAYBOOK)
    actions = {next(k for k in task if "." in k) for task in play["tasks"] if "block" not in task}
    assert {"ansible.builtin.command", "hybrid_operator.util.probe", "ansible.builtin.set_fact"} <= actions
    assert selftest.TOKEN_VAR in selftest.PLAYBOOK
