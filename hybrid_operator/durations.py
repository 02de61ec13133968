"""Go-style durations ("10h", "1m30s", "500ms"), as operator-sdk's flags, watches.yaml and annotations use.

Used by the watches loader, the CLI flags, the reconcile-period annotation and the ``requeue_after``
action plugin's results, so every place reads "30s" the same way.
"""

from __future__ import annotations

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str | int | float) -> float:
    """Return seconds for a Go duration string; a bare number is taken as seconds.

    Raises ValueError with the offending text when it is not a duration.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, int | float):
        if text < 0:
            raise ValueError(f"negative duration: {text!r}")
        return float(text)
    value = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    if value == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _PART.finditer(value):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(value) or not value:
        raise ValueError(f"not a duration (expected e.g. 30s, 1m30s, 10h): {text!r}")
    return total


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
