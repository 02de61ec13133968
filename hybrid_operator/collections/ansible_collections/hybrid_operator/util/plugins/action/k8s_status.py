# Copyright: hybrid-operator contributors
# Apache License 2.0
"""Action plugin: set status keys and conditions (arguments as operator_sdk.util.k8s_status)."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase
from ansible_collections.hybrid_operator.util.plugins.plugin_utils import requests

_AUTH_KEYS = (
    "kubeconfig",
    "context",
    "host",
    "api_key",
    "username",
    "password",
    "validate_certs",
    "ca_cert",
    "client_cert",
    "client_key",
    "proxy",
    "persist_config",
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = requests.plain(dict(self._task.args))
        missing = [k for k in ("api_version", "kind", "name") if not args.get(k)]
        if missing:
            return {**result, "failed": True, "msg": f"missing required arguments: {', '.join(missing)}"}
        status = args.get("status") or {}
        if not isinstance(status, dict):
            return {**result, "failed": True, "msg": "status must be a mapping"}
        if "conditions" in status:  # conditions given inside status count as conditions
            args["conditions"] = (args.get("conditions") or []) + (status.pop("conditions") or [])
        conditions, problem = requests.validate_conditions(args.get("conditions"))
        if problem:
            return {**result, "failed": True, "msg": problem}
        api_version, kind, name, namespace = (
            args["api_version"],
            args["kind"],
            args["name"],
            args.get("namespace"),
        )
        if requests.is_owner(api_version, kind, name, namespace):
            obj = task_vars.get(requests.owner_var_name(api_version, kind)) or {}
            current = requests.plain(obj.get("status") or {}) if isinstance(obj, dict) else {}
            changed = requests.status_differs(current, status, conditions)
            request = {"status": status, "conditions": conditions}
            return {**result, "changed": changed, requests.RESULT_KEY: request, "result": {"status": status}}
        if self._play_context.check_mode:  # another object's status: check mode writes nothing
            return {**result, "changed": True, "msg": f"check mode: the status of {kind} {name} was not written"}
        auth = {k: args[k] for k in _AUTH_KEYS if args.get(k) is not None}
        try:
            changed, obj = requests.direct_status_patch(auth, api_version, kind, name, namespace, status, conditions)
        except Exception as exc:  # surfaced as a failed task with the API's message
            return {**result, "failed": True, "msg": f"could not update the status of {kind} {name}: {exc}"}
        return {**result, "changed": changed, "result": obj}
