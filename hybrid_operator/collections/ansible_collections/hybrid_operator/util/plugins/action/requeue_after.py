# Copyright: hybrid-operator contributors
# Apache License 2.0
"""Action plugin: reconcile the object again after a delay (arguments as operator_sdk.util.requeue_after)."""

from __future__ import annotations

import re
from typing import Any

from ansible.plugins.action import ActionBase
from ansible_collections.hybrid_operator.util.plugins.plugin_utils import requests

_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)")


def parse(text: str) -> float | None:
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    total, pos = 0.0, 0
    for match in _PART.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return total if pos == len(text) and text else None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        raw = self._task.args.get("time")
        seconds = parse(str(raw)) if raw is not None else None
        if seconds is None:
            return {
                **result,
                "failed": True,
                "msg": f"time must be a duration like 30s, 1m or 1h30m, got {raw!r}",
            }
        # `period`, a Go duration, is what operator-sdk's Ansible operator reads from a task named
        # operator_sdk.util.requeue_after: a role using that name requeues under either operator.
        period = format(seconds, ".9f").rstrip("0").rstrip(".") + "s"
        if requests.owner() is None:
            return {**result, "changed": False, "period": period, "msg": "not run by hybrid-operator"}
        return {**result, "changed": False, "period": period, requests.RESULT_KEY: {"requeue_after": seconds}}
