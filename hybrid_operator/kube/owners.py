"""Who owns what a run creates: the owner of a run, the owner references and operator-sdk's
``primary-resource`` annotations the run proxy writes into a child, and how a read object is recognised as
a child again.

Used by ``proxy.server`` on every create and every read of one object a run makes, and by ``reactor.dependents``,
which maps a child's events back to its owner through the same references and annotations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PRIMARY_RESOURCE = "operator-sdk/primary-resource"
PRIMARY_RESOURCE_TYPE = "operator-sdk/primary-resource-type"


@dataclass(frozen=True)
class Owner:
    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def reference(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


@dataclass(frozen=True)
class Child:
    """A kind some run created, with whether it was namespaced and in the owner's namespace."""

    api_version: str
    kind: str
    namespaced: bool
    same_namespace: bool
    owner: Owner


ChildHandler = Callable[[Child], None]


def inject_owner(body: dict[str, Any], owner: Owner, namespace: str | None) -> None:
    """Make the created object point back at its owner (in place; the body is the request's own copy).

    ``namespace`` is where the child lives: the request path's namespace, ``None`` for a cluster-scoped
    child (whatever its body's ``metadata.namespace`` says). An ownerReference only when both live in the
    same namespace, as upstream: the garbage collector refuses a namespaced owner of a cluster-scoped child
    (``OwnerRefInvalidNamespace``) and never looks for an owner in another namespace. Every other child
    gets operator-sdk's ``primary-resource`` annotations, which the dependent watches map back.
    """
    meta = body.setdefault("metadata", {})
    if namespace and owner.namespace and namespace == owner.namespace:
        refs = meta.setdefault("ownerReferences", [])
        if any(r.get("uid") == owner.uid for r in refs):
            return
        reference = owner.reference()
        if any(r.get("controller") for r in refs):
            reference["controller"] = False  # the role set its own controller: respect it
        refs.append(reference)
        return
    annotations = meta.setdefault("annotations", {})
    annotations.setdefault(PRIMARY_RESOURCE, f"{owner.namespace}/{owner.name}")
    annotations.setdefault(PRIMARY_RESOURCE_TYPE, f"{owner.kind}.{owner.group}")


def owned_by_kind(obj: dict[str, Any], owner: Owner) -> bool:
    """Whether ``obj`` points at an object of the owner's kind: an ownerReference of that apiVersion and
    kind, or operator-sdk's primary-resource-type annotation naming its kind and group."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return False
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, dict) and ref.get("apiVersion") == owner.api_version and ref.get("kind") == owner.kind:
            return True
    annotations = meta.get("annotations")
    primary_type = annotations.get(PRIMARY_RESOURCE_TYPE) if isinstance(annotations, dict) else None
    return primary_type == f"{owner.kind}.{owner.group}"
