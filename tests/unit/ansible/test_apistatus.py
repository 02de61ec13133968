"""A 422 from the API server, as kubernetes.core's modules report it, read into a line naming the fields."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hybrid_operator.ansible import apistatus
from hybrid_operator.ansible.results import MAX_FAILURE_MESSAGE, EventCollector


def status(code: int = 422, causes: list[dict[str, Any]] | None = None, **details: Any) -> dict[str, Any]:
    """A Status as the API server sends it (apimachinery's ``metav1.Status``)."""
    causes = (
        causes
        if causes is not None
        else [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "x": must be an integer',
                "field": "spec.replicas",
            }
        ]
    )
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Deployment.apps "web" is invalid: spec.replicas: Invalid value: "x": must be an integer',
        "reason": "Invalid",
        "details": {"name": "web", "group": "apps", "kind": "Deployment", "causes": causes, **details},
        "code": code,
    }


def test_a_422_names_the_field_and_keeps_what_the_module_was_doing() -> None:
    text = "Failed to create object: " + json.dumps(status(), separators=(",", ":")) + "\n"
    assert apistatus.invalid_message(text) == f"Failed to create object: {_line()}"


def test_a_status_inside_a_bytes_literal_is_read_too() -> None:
    """What kubernetes.core prints when the client hands it the body as bytes."""
    body = json.dumps(status(causes=[{"field": "data.count", "message": "Invalid value: 4: é must be a string"}]))
    text = f"Failed to patch object: {body.encode()!r}"
    assert apistatus.invalid_message(text) == (
        'Failed to patch object: Deployment.apps "web" is invalid: data.count: Invalid value: 4: é must be a string'
    )


def test_an_echoed_patch_is_elided_so_the_reason_after_it_is_kept() -> None:
    """A ConfigMap patch with a number in ``data``: the API server echoes the whole patch, then says why."""
    patch = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "data": {"iterations": 2, "pad": "x" * 400}})
    cause = f"Invalid value: {json.dumps(patch)}: json: cannot unmarshal number into Go struct field of type string"
    text = "Failed to patch object: " + repr(json.dumps(status(causes=[{"field": "patch", "message": cause}])).encode())
    line = apistatus.invalid_message(text)
    assert line is not None
    assert line.endswith(
        'patch: Invalid value: "{\\"apiVersion\\": \\"v1\\", \\"kind\\": ...": json: '
        "cannot unmarshal number into Go struct field of type string"
    ), line
    assert "pad" not in line


def test_a_short_value_is_kept_whole() -> None:
    cause = {
        "field": "spec.replicas",
        "message": 'Invalid value: "seven": spec.replicas in body must be of type integer',
    }
    line = apistatus.invalid_message("x: " + json.dumps(status(causes=[cause])))
    assert line is not None and line.endswith(cause["message"]), line


def test_many_causes_are_bounded_and_counted() -> None:
    causes = [{"field": f"spec.items[{i}].name", "message": "Required value" + "!" * 500} for i in range(9)]
    line = apistatus.invalid_message("Failed to apply object: " + json.dumps(status(causes=causes)))
    assert line is not None
    assert line.count("Required value") == apistatus.MAX_CAUSES and line.endswith("; and 4 more")
    assert "spec.items[4].name: Required value" in line and "spec.items[5]" not in line
    assert len(line) < 1300


def test_a_cause_without_a_field_a_core_kind_and_a_cause_that_repeats_its_field() -> None:
    causes = [{"message": "metadata.name: Required value"}, {"reason": "FieldValueRequired"}]
    text = json.dumps(status(causes=causes, group="", kind="ConfigMap", name=""))
    assert apistatus.invalid_message(text) == "ConfigMap is invalid: metadata.name: Required value; FieldValueRequired"


def test_a_422_without_causes_gives_its_own_message() -> None:
    line = apistatus.invalid_message("Failed: " + json.dumps(status(causes=[])))
    assert line == 'Failed: Deployment.apps "web" is invalid: ' + status()["message"]


def test_anything_else_is_left_alone() -> None:
    assert apistatus.invalid_message("Failed to create object: " + json.dumps(status(code=403))) is None
    assert apistatus.invalid_message("non-zero return code") is None
    assert apistatus.invalid_message('{"kind": "Status", "code": 422') is None  # cut short
    assert apistatus.invalid_message("x" * apistatus.MAX_TEXT + json.dumps(status())) is None


_text = st.text(max_size=40)
_cause = st.fixed_dictionaries({}, optional={"field": _text, "message": _text, "reason": _text})


@given(before=_text, causes=st.lists(_cause, max_size=12), name=_text, as_bytes=st.booleans())
def test_any_422_reads_as_one_bounded_line_with_every_shown_field(
    before: str, causes: list[dict[str, str]], name: str, as_bytes: bool
) -> None:
    body = json.dumps(status(causes=causes, name=name), ensure_ascii=as_bytes)
    line = apistatus.invalid_message(before + (repr(body.encode()) if as_bytes else body))
    assert line is not None
    for cause in causes[: apistatus.MAX_CAUSES]:
        field, message = cause.get("field", "").strip(), cause.get("message", "").strip()
        if field and not message.startswith(field + ":"):
            assert f"{field}: {message[:50]}" in line
        elif message:
            assert message[:50] in line
    assert line.endswith(f"; and {len(causes) - apistatus.MAX_CAUSES} more") == (len(causes) > apistatus.MAX_CAUSES)
    assert len(line) <= len(before) + len(name) + 40 + apistatus.MAX_CAUSES * (40 + 2 + apistatus.MAX_CAUSE) + 20


@given(text=st.text(max_size=300))
def test_any_text_is_read_without_error(text: str) -> None:
    apistatus.invalid_message(text)
    apistatus.invalid_message(text + json.dumps(status()) + text)


def test_the_failed_tasks_message_and_the_failure_message_are_the_readable_bounded_line() -> None:
    collector = EventCollector("run")
    body = json.dumps(status())
    for task in ("Apply the Deployment", "Another"):
        res = {"msg": f"Failed to create object: {body}", "reason": "Unprocessable Entity", "status": 422}
        data = {"task": task, "res": res, "task_uuid": task}
        collector.add({"event": "runner_on_failed", "event_data": data})
    long = {"msg": "y" * 3000}
    collector.add({"event": "runner_on_failed", "event_data": {"task": "Long", "res": long, "task_uuid": "l"}})
    first = collector.result.failed_tasks[0]
    assert first.message == f"Failed to create object: {_line()}"
    message = collector.result.failure_message
    assert message.startswith(f"Apply the Deployment: Failed to create object: {_line()}; Another: ")
    assert len(message) == MAX_FAILURE_MESSAGE and message.endswith("...")


def _line() -> str:
    return 'Deployment.apps "web" is invalid: spec.replicas: Invalid value: "x": must be an integer'
