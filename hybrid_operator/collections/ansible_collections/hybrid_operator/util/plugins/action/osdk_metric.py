# Copyright: hybrid-operator contributors
# Apache License 2.0
"""Action plugin: create or update a custom Prometheus metric (arguments as operator_sdk.util.osdk_metric).

It runs in the Ansible controller, so no module process is started per metric, and the operator's warm
executor has nothing to do with it: one HTTP request to the operator's receiver per task.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.hybrid_operator.util.plugins.plugin_utils import requests, usermetric


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        try:
            _, args = self.validate_argument_spec(argument_spec=usermetric.ARGUMENT_SPEC)
        except AnsibleActionFail as exc:
            return {**result, "failed": True, "msg": getattr(exc, "message", str(exc))}
        if self._play_context.check_mode:  # as the Galaxy module, which does not support check mode
            return {**result, "skipped": True, "msg": "osdk_metric does not support check mode"}
        url, problem = usermetric.address(args.get("address"))
        if url is None:
            return {**result, "failed": True, "msg": problem}
        status, text = usermetric.send(url, requests.plain(usermetric.payload(args)))
        if status != 200:
            failure: dict[str, Any] = {**result, "failed": True, "msg": text}
            if status:
                failure["status_code"] = status
            return failure
        return {**result, "changed": True}
