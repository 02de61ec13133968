"""operator-sdk's per-object annotations, parsed with bounds before a run.

Called by ``reactor.reconciling`` for every reconcile. Whoever may annotate a custom resource is usually
far less trusted than the operator, so each annotation is a knob with limits: a reconcile period of
``1ms`` would make the object run in a tight loop, a verbosity of a million would make every run crawl,
an artifact count of a billion would fill the disk. A value out of bounds or unparsable raises
``InvalidObject`` naming the annotation; the reconciler reports it on the object and does not run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hybrid_operator.errors import InvalidObject
from hybrid_operator.settings import durations

PREFIX = "ansible.sdk.operatorframework.io/"
RECONCILE_PERIOD = PREFIX + "reconcile-period"
VERBOSITY = PREFIX + "verbosity"
MAX_RUNNER_ARTIFACTS = PREFIX + "max-runner-artifacts"

REASON = "InvalidAnnotation"
MIN_PERIOD = durations.PERIOD_FLOOR  # seconds; 0 still means "no periodic reconcile"
MAX_PERIOD = durations.PERIOD_CEILING
MAX_VERBOSITY = 7  # ansible-playbook's -vvvvvvv
MAX_ARTIFACTS = 1000  # run dirs kept per object


@dataclass(frozen=True)
class RunSettings:
    """What an object's annotations set for its runs (the watch's or the operator's defaults otherwise)."""

    reconcile_period: float
    verbosity: int
    max_artifacts: int


def run_settings(meta: Mapping[str, Any], *, period: float, verbosity: int, max_artifacts: int) -> RunSettings:
    """The object's run settings; ``InvalidObject`` naming every bad annotation at once."""
    raw = meta.get("annotations")
    annotations = raw if isinstance(raw, Mapping) else {}
    problems: list[str] = []

    def take(name: str, parse: Any, default: Any) -> Any:
        value = annotations.get(name)
        if value is None:
            return default
        try:
            return parse(str(value))
        except ValueError as exc:
            problems.append(f"{name}: {exc}")
            return default

    settings = RunSettings(
        reconcile_period=take(RECONCILE_PERIOD, parse_period, period),
        verbosity=take(VERBOSITY, lambda v: _bounded_int(v, 0, MAX_VERBOSITY), verbosity),
        max_artifacts=take(MAX_RUNNER_ARTIFACTS, lambda v: _bounded_int(v, 0, MAX_ARTIFACTS), max_artifacts),
    )
    if problems:
        raise InvalidObject(REASON, "Invalid annotation " + "; ".join(problems))
    return settings


def parse_period(text: str) -> float:
    """A reconcile period: ``0`` (never), or between ``MIN_PERIOD`` and ``MAX_PERIOD`` (watches.yaml's rule)."""
    if len(text) > 64:
        raise ValueError("not a duration: longer than 64 characters")
    return durations.parse_period(text, floor=MIN_PERIOD, ceiling=MAX_PERIOD)


def _bounded_int(text: str, low: int, high: int) -> int:
    stripped = text.strip()
    if not (stripped.isascii() and stripped.lstrip("-").isdigit()) or len(stripped) > 12:
        raise ValueError(f"not a whole number: {text[:64]!r}")
    value = int(stripped)
    if not low <= value <= high:
        raise ValueError(f"{value} is outside {low}-{high}")
    return value


def operator_annotations(meta: Mapping[str, Any]) -> dict[str, str]:
    """The operator-sdk annotations of an object: a change in any of them is worth a run."""
    raw = meta.get("annotations")
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items() if str(k).startswith(PREFIX)}
