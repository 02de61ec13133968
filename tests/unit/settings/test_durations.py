"""Go-style durations: parse_duration for flags, watches.yaml and annotations, parse_period, format_duration."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.settings.durations import (
    PERIOD_CEILING,
    PERIOD_FLOOR,
    format_duration,
    parse_duration,
    parse_period,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10h", 36000.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1h1m1s", 3661.0),
        ("1.5h", 5400.0),
        (".5s", 0.5),
        ("2m0s", 120.0),
        ("0", 0.0),
        ("0s", 0.0),
        ("30", 30.0),
        ("2.5", 2.5),
        (" 30s ", 30.0),
        (45, 45.0),
        (1.5, 1.5),
        (0, 0.0),
    ],
)
def test_parse(text: str | int | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "seconds"), [("1us", 1e-6), ("1µs", 1e-6), ("250ns", 2.5e-7)])
def test_parse_sub_millisecond(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "   ", "ten minutes", "-5s", "5 s", "1d", "1h30", "s", "1.2.3s", "10sm", "5S", True]
)
def test_parse_rejects(text: str | bool) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_negative_number_is_rejected() -> None:
    with pytest.raises(ValueError, match="negative"):
        parse_duration(-1)


def test_error_names_the_text() -> None:
    with pytest.raises(ValueError, match="'5 minutes'"):
        parse_duration("5 minutes")


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.5, "500ms"), (30, "30s"), (90, "1m30s"), (36000, "10h"), (3661, "1h1m1s")]
)
def test_format(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seconds", [0.25, 1, 59, 60, 61, 3599, 3600, 3601, 5400, 86400, 90061])
def test_format_reads_back(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


# -- bounds: every result is finite and within the caller's bounds -------------------------------------


@pytest.mark.parametrize("text", [float("inf"), float("nan"), -0.5, "9" * 400, "9" * 400 + "h", 10**400])
def test_non_finite_is_rejected(text: str | int | float) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_large_finite_durations_are_bounded_only_by_the_caller() -> None:
    assert parse_duration("2562048h") == 2562048 * 3600.0
    assert parse_duration(1e300) == 1e300


def test_error_for_a_huge_text_stays_short() -> None:
    with pytest.raises(ValueError) as caught:
        parse_duration("9" * 100_000)
    assert len(str(caught.value)) < 200


def test_caller_bounds() -> None:
    assert parse_duration("1s", minimum=1, maximum=1) == 1.0
    with pytest.raises(ValueError, match="below 1s"):
        parse_duration("500ms", minimum=1)
    with pytest.raises(ValueError, match="above 1h"):
        parse_duration("61m", maximum=3600)


def test_non_ascii_digits_are_not_a_duration() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("\u0663s")  # ARABIC-INDIC DIGIT THREE


@pytest.mark.parametrize(("text", "seconds"), [("0", 0.0), ("0s", 0.0), ("1s", 1.0), ("10h", 36000.0), (45, 45.0)])
def test_period_accepts_zero_and_one_second_to_a_year(text: str | int, seconds: float) -> None:
    assert parse_period(text) == seconds


def test_period_of_exactly_a_year_is_accepted() -> None:
    assert parse_period("8760h") == PERIOD_CEILING


@pytest.mark.parametrize("text", ["1ns", "999ms", 0.5, "8761h", ".inf", float("inf"), float("nan"), "9" * 400])
def test_period_outside_the_bounds_is_rejected(text: str | float) -> None:
    with pytest.raises(ValueError, match=r"0 \(never\) or from 1s to 8760h|duration"):
        parse_period(text)


def test_period_error_names_the_bounds_and_text() -> None:
    with pytest.raises(ValueError, match=r"must be 0 \(never\) or from 1s to 8760h, got '1ns'"):
        parse_period("1ns")


# -- properties: nothing but ValueError, and finite results within bounds ------------------------------

DURATION_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="0123456789.nsuµμmh +-e", max_size=40),
    st.from_regex(r"[0-9]{0,400}(\.[0-9]{0,5})?(ns|us|µs|ms|s|m|h)?", fullmatch=True),
)
DURATION_INPUT = st.one_of(DURATION_TEXT, st.integers(), st.floats(), st.booleans(), st.none())


@settings(max_examples=200, deadline=None)
@given(DURATION_INPUT)
def test_parse_duration_raises_only_value_error_and_returns_finite_in_range(text: object) -> None:
    try:
        seconds = parse_duration(text)  # type: ignore[arg-type]
    except ValueError:
        return
    assert math.isfinite(seconds)
    assert seconds >= 0


@settings(max_examples=200, deadline=None)
@given(DURATION_INPUT)
def test_parse_period_is_zero_or_within_its_bounds(text: object) -> None:
    try:
        seconds = parse_period(text)  # type: ignore[arg-type]
    except ValueError:
        return
    assert seconds == 0 or PERIOD_FLOOR <= seconds <= PERIOD_CEILING


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0.001, max_value=1e9, allow_nan=False))
def test_format_then_parse_is_close(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, rel=1e-4)
