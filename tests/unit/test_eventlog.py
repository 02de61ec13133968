"""--ansible-log-events: upstream's values in any case, and what each level logs."""

from __future__ import annotations

import logging

import pytest

from hybrid_operator import eventlog
from tests.unit.settings.test_config import config


@pytest.mark.parametrize(("text", "level"), [("Tasks", "tasks"), ("EVERYTHING", "everything"), ("nothing", "nothing")])
def test_upstream_values_are_read_in_any_case(text: str, level: str) -> None:
    assert config(f"--ansible-log-events={text}").logging.run_events == level


@pytest.mark.parametrize("text", ["all", "", "tasks; rm -rf /", "\u0442asks", "x" * 10_000])
def test_anything_else_is_refused_naming_the_choices(text: str) -> None:
    with pytest.raises(ValueError, match="tasks, everything, nothing") as info:
        eventlog.parse_level(text)
    assert len(str(info.value)) < 200


def test_only_everything_logs_each_event() -> None:
    assert eventlog.event_logger("tasks") is None
    assert eventlog.event_logger("nothing") is None
    assert eventlog.event_logger("everything") is not None
    assert eventlog.shows_failed_output("tasks") and not eventlog.shows_failed_output("nothing")


def test_an_event_line_names_the_task_never_its_arguments_or_results(caplog: pytest.LogCaptureFixture) -> None:
    callback = eventlog.event_logger("everything")
    assert callback is not None
    event = {
        "event": "runner_on_ok",
        "event_data": {
            "task": "Create the Deployment",
            "task_action": "kubernetes.core.k8s",
            "host": "localhost",
            "task_args": "password=hunter2",
            "res": {"token": "s3cr3t"},
        },
    }
    with caplog.at_level(logging.INFO, logger="hybrid_operator.ansible_events"):
        callback(event)
        callback({"event": "verbose", "event_data": "not a mapping"})
    (line, other) = caplog.records
    assert line.fields == {  # type: ignore[attr-defined]
        "event": "runner_on_ok",
        "task": "Create the Deployment",
        "task_action": "kubernetes.core.k8s",
        "host": "localhost",
    }
    assert other.fields == {"event": "verbose"}  # type: ignore[attr-defined]
    assert "hunter2" not in caplog.text and "s3cr3t" not in caplog.text
