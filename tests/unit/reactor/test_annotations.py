"""operator-sdk's per-object annotations: bounded, and nothing but InvalidObject for any value."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.errors import InvalidObject
from hybrid_operator.reactor import annotations as ann

DEFAULTS = {"period": 36000.0, "verbosity": 2, "max_artifacts": 20}


def settings_for(values: dict[str, str]) -> ann.RunSettings:
    return ann.run_settings({"annotations": values}, **DEFAULTS)  # type: ignore[arg-type]


def test_no_annotations_give_the_defaults() -> None:
    assert ann.run_settings({}, **DEFAULTS) == ann.RunSettings(36000.0, 2, 20)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "seconds"), [("0", 0.0), ("1s", 1.0), ("90s", 90.0), ("1h30m", 5400.0), ("8760h", 31536000.0)]
)
def test_periods_within_bounds(raw: str, seconds: float) -> None:
    assert settings_for({ann.RECONCILE_PERIOD: raw}).reconcile_period == seconds


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("1ms", "from 1s to 8760h"),
        ("999ms", "from 1s"),
        ("1ns", "from 1s"),
        ("9000h", "to 8760h"),
        ("1" + "0" * 400, "longer than 64"),
        ("9" * 60, "to 8760h"),
        ("soon", "not a duration"),
        ("-1s", "not a duration"),
    ],
)
def test_periods_out_of_bounds_name_the_annotation(raw: str, says: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        settings_for({ann.RECONCILE_PERIOD: raw})
    assert caught.value.reason == "InvalidAnnotation"
    assert ann.RECONCILE_PERIOD in caught.value.message
    assert says in caught.value.message


@pytest.mark.parametrize("raw", ["-1", "8", "1000000", "1e3", "two", "", " ", "٣"])
def test_verbosity_outside_0_to_7_is_refused(raw: str) -> None:
    with pytest.raises(InvalidObject, match=ann.VERBOSITY):
        settings_for({ann.VERBOSITY: raw})


@pytest.mark.parametrize(("raw", "value"), [("0", 0), ("7", 7), (" 3 ", 3)])
def test_verbosity_within_bounds(raw: str, value: int) -> None:
    assert settings_for({ann.VERBOSITY: raw}).verbosity == value


@pytest.mark.parametrize("raw", ["-1", "1001", "999999999999999", "x"])
def test_artifact_counts_out_of_bounds_are_refused(raw: str) -> None:
    with pytest.raises(InvalidObject, match=ann.MAX_RUNNER_ARTIFACTS):
        settings_for({ann.MAX_RUNNER_ARTIFACTS: raw})


def test_every_bad_annotation_is_named_at_once() -> None:
    with pytest.raises(InvalidObject) as caught:
        settings_for({ann.RECONCILE_PERIOD: "1ms", ann.VERBOSITY: "1000000", ann.MAX_RUNNER_ARTIFACTS: "-1"})
    for name in (ann.RECONCILE_PERIOD, ann.VERBOSITY, ann.MAX_RUNNER_ARTIFACTS):
        assert name in caught.value.message


def test_other_annotations_are_not_ours_to_judge() -> None:
    assert settings_for({"example.com/anything": "1ms"}) == ann.RunSettings(36000.0, 2, 20)


def test_operator_annotations_are_those_with_the_prefix() -> None:
    meta = {"annotations": {ann.VERBOSITY: "3", "other/x": "y"}}
    assert ann.operator_annotations(meta) == {ann.VERBOSITY: "3"}
    assert ann.operator_annotations({"annotations": None}) == {}


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from([ann.RECONCILE_PERIOD, ann.VERBOSITY, ann.MAX_RUNNER_ARTIFACTS]), st.text()))
def test_any_value_parses_or_is_invalid_object(values: dict[str, str]) -> None:
    try:
        got = settings_for(values)
    except InvalidObject as exc:
        assert exc.reason == "InvalidAnnotation"
        return
    assert got.reconcile_period == 0 or ann.MIN_PERIOD <= got.reconcile_period <= ann.MAX_PERIOD
    assert 0 <= got.verbosity <= ann.MAX_VERBOSITY
    assert 0 <= got.max_artifacts <= ann.MAX_ARTIFACTS
