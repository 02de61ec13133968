"""Go-style durations: parse_duration for flags, watches.yaml and annotations, and format_duration."""

from __future__ import annotations

import pytest

from hybrid_operator.durations import format_duration, parse_duration


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
