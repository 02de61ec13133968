"""What the operator's log shows of each run (``--ansible-log-events``), operator-sdk's three levels.

Used by ``orchestration`` (the per-event callback it gives every kind's runs) and ``reconciling`` (the
run's own lines). ``tasks``, the default: one line per run (kind, namespace, name, run id, duration,
counts) and, for a failed run, the failed tasks' output. ``everything``: also one line per Ansible
event as it arrives (its type, task, action and host; never its arguments or results, which can hold
secrets a task marked ``no_log`` would hide only in its output). ``nothing``: the run's line alone.
Upstream's levels are accepted in any case (``Tasks``, ``Everything``, ``Nothing``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("hybrid_operator.ansible_events")

TASKS, EVERYTHING, NOTHING = "tasks", "everything", "nothing"
LEVELS = (TASKS, EVERYTHING, NOTHING)
_FIELDS = ("task", "task_action", "host", "play")  # event_data keys worth a log field; never args/results


def parse_level(text: str) -> str:
    """``--ansible-log-events``' value, any case; ValueError naming the choices for anything else."""
    level = text.strip().lower()
    if level not in LEVELS:
        raise ValueError(f"must be one of {', '.join(LEVELS)} (any case), got {text[:40]!r}")
    return level


def shows_failed_output(level: str) -> bool:
    return level != NOTHING


def event_logger(level: str) -> Callable[[dict[str, Any]], None] | None:
    """The callback a kind's runs send each event to, or None when no event is logged one by one."""
    if level != EVERYTHING:
        return None
    return _log_event


def _log_event(event: dict[str, Any]) -> None:
    data = event.get("event_data")
    fields: dict[str, Any] = {"event": str(event.get("event", ""))[:64]}
    if isinstance(data, dict):
        fields.update({key: str(data[key])[:200] for key in _FIELDS if data.get(key)})
    log.info("ansible event", extra={"fields": fields})
