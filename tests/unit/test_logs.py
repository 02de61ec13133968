"""Both log formats keep every field: bound ones (kind, namespace, name, run id), extra keys, and fields."""

from __future__ import annotations

import json
import logging

import pytest

from hybrid_operator import logs


def record(msg: str = "watch failed", **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("hybrid_operator.kube.watching", logging.WARNING, __file__, 1, msg, None, None)
    for key, value in extra.items():
        setattr(rec, key, value)
    return rec


def test_text_lines_carry_bound_extra_and_field_values() -> None:
    with logs.bind(kind="Foo.v1alpha1.samplecontroller.k8s.io", namespace="ns", name="a b", run_id="abc"):
        line = logs.TextFormatter().format(record(gvk="Foo", fields={"duration": 1.5}))
    assert line.endswith(
        'watch failed kind=Foo.v1alpha1.samplecontroller.k8s.io namespace=ns name="a b" run_id=abc gvk=Foo duration=1.5'
    )


def test_json_lines_carry_them_as_top_level_keys() -> None:
    with logs.bind(kind="Foo", namespace="ns", name="a", run_id="abc"):
        data = json.loads(logs.JsonFormatter().format(record(run_id="override", fields={"ok": 3})))
    assert {k: data[k] for k in ("kind", "namespace", "name", "run_id", "ok", "msg", "level")} == {
        "kind": "Foo",
        "namespace": "ns",
        "name": "a",
        "run_id": "override",
        "ok": 3,
        "msg": "watch failed",
        "level": "warning",
    }


def test_bound_fields_end_with_their_block_and_skip_none() -> None:
    with logs.bind(kind="Foo", run_id=None):
        assert logs.record_fields(record()) == {"kind": "Foo"}
    assert logs.record_fields(record()) == {}


@pytest.mark.parametrize("formatter", [logs.TextFormatter(), logs.JsonFormatter()])
def test_exceptions_are_kept(formatter: logging.Formatter) -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        rec = record(exc_info=None)
        rec.exc_info = sys.exc_info()
    assert "ValueError: boom" in formatter.format(rec)
