# Copyright: hybrid-operator contributors
# Apache License 2.0
"""Shared by the hybrid_operator.util action plugins: who is being reconciled, and how to talk to the API.

A request about the object being reconciled is returned in the task result under ``hybrid_operator`` and
applied by the operator after the run (one status patch, one writer). A request about any other object,
or a run outside the operator, is applied directly with the Kubernetes client.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from typing import Any

RESULT_KEY = "hybrid_operator"
OWNER_ENV = "HYBRID_OPERATOR_OWNER"
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def owner() -> dict[str, Any] | None:
    """The object this run reconciles ({apiVersion, kind, name, namespace}), if run by the operator."""
    raw = os.environ.get(OWNER_ENV)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def is_owner(api_version: str, kind: str, name: str, namespace: str | None) -> bool:
    own = owner()
    if own is None:
        return False
    return (
        own.get("apiVersion") == api_version
        and own.get("kind") == kind
        and own.get("name") == name
        and (own.get("namespace") or "") == (namespace or "")
    )


def owner_var_name(api_version: str, kind: str) -> str:
    group = api_version.rpartition("/")[0]
    return re.sub(r"[.\-]", "_", f"_{group}_{kind.lower()}")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def plain(value: Any) -> Any:
    """Turn Ansible's tagged/unsafe strings and mappings into plain JSON types."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def validate_conditions(conditions: Any) -> tuple[list[dict[str, Any]], str | None]:
    """operator-sdk's rules: type required, status True|False|Unknown, reason CamelCase."""
    if conditions in (None, ""):
        return [], None
    if not isinstance(conditions, list):
        return [], "conditions must be a list"
    out = []
    for i, raw in enumerate(conditions):
        if not isinstance(raw, dict) or not raw.get("type"):
            return [], f"conditions[{i}] needs a 'type'"
        cond = plain(raw)
        status = cond.get("status", "Unknown")
        if isinstance(status, bool):
            status = "True" if status else "False"
        if status not in ("True", "False", "Unknown"):
            return [], f"conditions[{i}].status must be True, False or Unknown, got {status!r}"
        cond["status"] = status
        reason = cond.get("reason")
        if reason is not None and not _REASON.match(str(reason)):
            return [], f"conditions[{i}].reason must be CamelCase (letters, digits), got {reason!r}"
        out.append(cond)
    return out, None


def merge_conditions(current: list[dict[str, Any]], updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge by type; lastTransitionTime moves only when the status flips."""
    merged = [dict(c) for c in current if isinstance(c, dict)]
    for update in updates:
        old = next((c for c in merged if c.get("type") == update["type"]), None)
        new = dict(update)
        if old is not None and old.get("status") == new.get("status") and old.get("lastTransitionTime"):
            new.setdefault("lastTransitionTime", old["lastTransitionTime"])
        new.setdefault("lastTransitionTime", now())
        merged = [c for c in merged if c.get("type") != update["type"]] + [new]
    return merged


def status_differs(current: dict[str, Any], status: dict[str, Any], conditions: list[dict[str, Any]]) -> bool:
    for key, value in status.items():
        if current.get(key) != value:
            return True
    existing = {c.get("type"): c for c in current.get("conditions") or [] if isinstance(c, dict)}
    for cond in conditions:
        old = existing.get(cond["type"])
        if old is None or any(old.get(k) != cond.get(k) for k in ("status", "reason", "message")):
            return True
    return False


def api_client(auth: dict[str, Any]) -> Any:
    """A kubernetes ApiClient from the module's auth options, the kubeconfig, or in-cluster config."""
    from kubernetes import client, config  # imported lazily: only direct requests need it

    kubeconfig = auth.get("kubeconfig") or os.environ.get("K8S_AUTH_KUBECONFIG") or os.environ.get("KUBECONFIG")
    try:
        return config.new_client_from_config(config_file=kubeconfig, context=auth.get("context"))
    except Exception:  # no kubeconfig: in a pod
        config.load_incluster_config()
        return client.ApiClient()


def object_path(api: Any, api_version: str, kind: str, name: str, namespace: str | None) -> str:
    from kubernetes import dynamic

    resource = dynamic.DynamicClient(api).resources.get(api_version=api_version, kind=kind)
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    ns = f"/namespaces/{namespace}" if resource.namespaced and namespace else ""
    return f"{base}{ns}/{resource.name}/{name}"


def direct_status_patch(
    auth: dict[str, Any],
    api_version: str,
    kind: str,
    name: str,
    namespace: str | None,
    status: dict[str, Any],
    conditions: list[dict[str, Any]],
) -> tuple[bool, dict[str, Any]]:
    """Patch another object's status now (merge patch on the status subresource)."""
    api = api_client(auth)
    path = object_path(api, api_version, kind, name, namespace)
    current = _call(api, "GET", path)
    current_status = current.get("status") or {}
    if not status_differs(current_status, status, conditions):
        return False, current
    body: dict[str, Any] = {"status": dict(status)}
    if conditions:
        body["status"]["conditions"] = merge_conditions(current_status.get("conditions") or [], conditions)
    return True, _call(api, "PATCH", path + "/status", body, "application/merge-patch+json")


def direct_event(auth: dict[str, Any], involved: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    api = api_client(auth)
    namespace = involved.get("namespace") or "default"
    stamp = now()
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved.get('name', 'object')}.", "namespace": namespace},
        "involvedObject": involved,
        "type": event["type"],
        "reason": event["reason"],
        "message": event["message"],
        "source": {"component": "hybrid-operator"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    return _call(api, "POST", f"/api/v1/namespaces/{namespace}/events", body)


def _call(api: Any, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
    """One REST call with the client's own connection pool and credentials (stable across client versions)."""
    headers = {"Accept": "application/json", "Content-Type": content_type}
    api.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
    response = api.rest_client.pool_manager.request(
        method,
        api.configuration.host + path,
        body=json.dumps(body).encode() if body is not None else None,
        headers=headers,
        preload_content=True,
        retries=False,
    )
    if response.status >= 400:
        raise RuntimeError(f"API server answered {response.status}: {response.data.decode(errors='replace')[:500]}")
    return json.loads(response.data or b"{}")
