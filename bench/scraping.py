"""Reading Prometheus text: the contenders' /metrics endpoints and the API server's own.

Only sums of counters are needed (runs done, API requests made), so a line scan is enough and keeps
the bench free of a parser dependency.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable


def http_get(url: str, timeout: float = 5) -> tuple[int, str]:
    """(status, body); status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode(errors="replace")
    except OSError as exc:
        return 0, str(exc)


def metric_sum(text: str, name: str, labels: Callable[[str], bool] | None = None) -> float:
    """Sum of every sample of ``name`` (all label sets, or those whose label text passes ``labels``)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or len(line) == len(name) or line[len(name)] not in "{ ":
            continue
        if line[len(name)] == "{":
            close = line.rindex("}")
            label_text, rest = line[len(name) + 1 : close], line[close + 1 :]
        else:
            label_text, rest = "", line[len(name) :]
        if labels is not None and not labels(label_text):
            continue
        try:
            total += float(rest.split()[0])
        except (IndexError, ValueError):
            continue
    return total
