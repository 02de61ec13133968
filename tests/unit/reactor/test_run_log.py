"""What the log says about one run: its line, and one line per task failure the role let pass."""

from __future__ import annotations

import logging

import pytest

from hybrid_operator import logs
from hybrid_operator.ansible.results import MAX_TOLERATED_KEPT, EventCollector
from hybrid_operator.reactor.queueing import Key
from hybrid_operator.reactor.reconciling import _log_run

KEY = Key("Memcached.v1alpha1.cache.example.com", "ns", "m")


def ignored(task: str, message: str) -> dict[str, object]:
    data = {"task": task, "role": "memcached", "host": "localhost", "ignore_errors": True, "res": {"msg": message}}
    return {"event": "runner_on_failed", "event_data": data, "stdout": "fatal: ... ...ignoring"}


def run_with(*events: dict[str, object]) -> EventCollector:
    collector = EventCollector("run-7")
    for event in events:
        collector.add(event)
    collector.add({"event": "playbook_on_stats", "event_data": {"ok": {"localhost": 2}}})
    return collector


def test_each_ignored_failure_is_one_line_naming_the_object_run_and_task(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hybrid_operator.reactor.reconciling")
    result = run_with(ignored("Read the optional settings", 'configmaps "settings" not found')).result
    _log_run(KEY, result)
    lines = [r for r in caplog.records if "let pass" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].getMessage() == 'task failure let pass by the role (ignore_errors): configmaps "settings" not found'
    assert logs.record_fields(lines[0]) == {
        "kind": KEY.gvk,
        "namespace": "ns",
        "name": "m",
        "run_id": "run-7",
        "task": "memcached : Read the optional settings",
    }
    assert any(r.getMessage() == "reconciled" for r in caplog.records)  # the run still succeeded


def test_at_most_ten_lines_a_run_then_a_count(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hybrid_operator.reactor.reconciling")
    result = run_with(*(ignored(f"check {i}", "nope") for i in range(30))).result
    _log_run(KEY, result)
    lines = [r.getMessage() for r in caplog.records if "let pass" in r.getMessage()]
    assert len(lines) == MAX_TOLERATED_KEPT + 1
    assert lines[-1] == "20 more task failures let pass by the role in this run, not logged"


def test_nothing_of_them_with_ansible_log_events_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hybrid_operator.reactor.reconciling")
    _log_run(KEY, run_with(ignored("t", "nope")).result, show_output=False)
    assert not [r for r in caplog.records if "let pass" in r.getMessage()]
