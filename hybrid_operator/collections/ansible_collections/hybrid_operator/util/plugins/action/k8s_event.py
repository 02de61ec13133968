# Copyright: hybrid-operator contributors
# Apache License 2.0
"""Action plugin: an Event on an object (arguments as operator_sdk.util.k8s_event)."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase
from ansible_collections.hybrid_operator.util.plugins.plugin_utils import requests


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = requests.plain(dict(self._task.args))
        reason, message = args.get("reason"), args.get("message", "")
        event_type = args.get("type", "Normal")
        if not reason:
            return {**result, "failed": True, "msg": "reason is required"}
        if event_type not in ("Normal", "Warning"):
            return {**result, "failed": True, "msg": f"type must be Normal or Warning, got {event_type!r}"}
        event = {"type": event_type, "reason": str(reason), "message": str(message)}
        own = requests.owner()
        involved = args.get("involvedObject") or args.get("involved_object")
        if own is not None and (
            not involved
            or requests.is_owner(
                involved.get("apiVersion", ""),
                involved.get("kind", ""),
                involved.get("name", ""),
                involved.get("namespace", args.get("namespace")),
            )
        ):
            return {**result, "changed": False, requests.RESULT_KEY: {"event": event}}
        if not involved:
            return {**result, "failed": True, "msg": "involvedObject is required outside the operator"}
        if self._play_context.check_mode:  # an Event on another object: check mode creates nothing
            return {**result, "changed": True, "msg": "check mode: the event was not created"}
        try:
            created = requests.direct_event({}, involved, event)
        except Exception as exc:
            return {**result, "failed": True, "msg": f"could not create the event: {exc}"}
        return {**result, "changed": True, "result": created}
