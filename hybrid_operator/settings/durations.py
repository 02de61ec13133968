"""Go-style durations ("10h", "1m30s", "500ms"), as operator-sdk's flags, watches.yaml and annotations use.

Used by the watches loader, the CLI flags, the reconcile-period annotation and the ``requeue_after``
action plugin's results, so every place reads "30s" the same way.

Every result is finite (``.inf``, NaN and 400-digit numbers are refused) and within bounds the caller picks
(by default anything from 0). ``parse_period`` is the stricter reading for a reconcile period in
watches.yaml: 0 (never) or from one second to one year, so neither a typo like ``1ns`` (a reconcile loop
with no pause) nor ``.inf`` gets through.
"""

from __future__ import annotations

import math
import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_BARE = re.compile(r"[0-9]+(\.[0-9]+)?")

PERIOD_FLOOR = 1.0  # a reconcile period below a second is a typo, and would keep a worker busy
PERIOD_CEILING = 365 * 24 * 3600.0  # one year; longer is "never", which is written 0


def parse_duration(text: str | int | float, *, minimum: float = 0.0, maximum: float = math.inf) -> float:
    """Return seconds for a Go duration string; a bare number is taken as seconds.

    Raises ValueError with the offending text when it is not a duration, is not finite, or is outside
    ``minimum``..``maximum`` (by default: any finite duration from 0).
    """
    seconds = _seconds(text)
    if not math.isfinite(seconds):
        raise ValueError(f"not a finite duration: {_show(text)}")
    if seconds < minimum:
        raise ValueError(f"duration below {format_duration(minimum)}: {_show(text)}")
    if seconds > maximum:
        raise ValueError(f"duration above {format_duration(maximum)}: {_show(text)}")
    return seconds


def parse_period(text: str | int | float, *, floor: float = PERIOD_FLOOR, ceiling: float = PERIOD_CEILING) -> float:
    """A reconcile period: 0 means never; anything else must lie within ``floor``..``ceiling``.

    Raises ValueError naming the bounds and the text.
    """
    seconds = parse_duration(text)
    if seconds != 0 and not floor <= seconds <= ceiling:
        raise ValueError(
            f"must be 0 (never) or from {format_duration(floor)} to {format_duration(ceiling)}, got {_show(text)}"
        )
    return seconds


def _seconds(text: str | int | float) -> float:
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(f"not a duration: {_show(text)}")
    if isinstance(text, int | float):
        if text < 0:
            raise ValueError(f"negative duration: {_show(text)}")
        try:
            return float(text)
        except OverflowError as exc:  # an int beyond any float
            raise ValueError(f"not a finite duration: {_show(text)}") from exc
    value = text.strip()
    if _BARE.fullmatch(value):
        return float(value)
    pos, total = 0, 0.0
    for match in _PART.finditer(value):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(value) or not value:
        raise ValueError(f"not a duration (expected e.g. 30s, 1m30s, 10h): {_show(text)}")
    return total


def _show(value: object, limit: int = 40) -> str:
    """repr(value), cut short: an error message must stay one readable line whatever the input."""
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def format_duration(seconds: float) -> str:
    """Render seconds the way Go prints durations, for logs and help texts."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    frac = seconds - whole
    out = ""
    if hours:
        out += f"{hours}h"
    if minutes or (hours and secs):
        out += f"{minutes}m"
    if secs or frac or not out:
        out += f"{secs + frac:g}s"
    return out
