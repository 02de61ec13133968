"""Writing to the objects the operator reconciles: status and finalizers. Never the spec.

Called by ``reactor.reconciling``. Status goes through the status subresource as a merge patch carrying
the resourceVersion it was computed from, so a concurrent writer causes a Conflict (retried by the
caller with fresh data) instead of a lost update. Finalizers are patched the same way. ``merge_patch``
applies such a patch locally, for ``reconcile FILE --check`` (the status the operator would write).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hybrid_operator.kube.client import Kube, KubeObject, Resource
from hybrid_operator.kube.objects import finalizers_of, name_of, namespace_of, resource_version_of


def _precondition(obj: KubeObject) -> str | None:
    """The resourceVersion the patch was computed from; null (no precondition) for an object without one."""
    return resource_version_of(obj) or None


def patch_status(kube: Kube, res: Resource, obj: KubeObject, status: dict[str, Any]) -> KubeObject:
    body = {"metadata": {"resourceVersion": _precondition(obj)}, "status": status}
    return kube.merge_patch(res, namespace_of(obj), name_of(obj), body, sub="status")


def set_finalizers(kube: Kube, res: Resource, obj: KubeObject, finalizers: list[str]) -> KubeObject:
    body = {"metadata": {"resourceVersion": _precondition(obj), "finalizers": finalizers or None}}
    return kube.merge_patch(res, namespace_of(obj), name_of(obj), body)


def add_finalizer(kube: Kube, res: Resource, obj: KubeObject, name: str) -> KubeObject:
    current = finalizers_of(obj)
    if name in current:
        return obj
    return set_finalizers(kube, res, obj, [*current, name])


def remove_finalizer(kube: Kube, res: Resource, obj: KubeObject, name: str) -> KubeObject:
    current = finalizers_of(obj)
    if name not in current:
        return obj
    return set_finalizers(kube, res, obj, [f for f in current if f != name])


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies the status the operator writes."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
