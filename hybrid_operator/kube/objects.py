"""The shapes of the raw API objects we read, and the few facts every layer asks of one.

Objects stay the plain dicts the API server sent (no home-made models of Kubernetes types); these
``TypedDict`` shapes say which of their fields the operator reads, and the accessors below read them the
one way: a missing or mistyped field is the empty value, never an exception, because an object can hold
anything its CRD allows (and a status anything at all). ``GVK`` names a kind; ``key_of`` is the one
conversion from an object to the ``(namespace, name)`` the queue and the caches use.

A leaf module: imported by ``kube``, ``settings`` (a watch names a ``GVK``), ``ansible`` and ``reactor``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict


@dataclass(frozen=True, order=True)
class GVK:
    """A group/version/kind; group is "" for the core API group."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.kind}.{self.version}.{self.group}" if self.group else f"{self.kind}.{self.version}"


class OwnerReference(TypedDict):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: NotRequired[bool]
    blockOwnerDeletion: NotRequired[bool]


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    generation: int
    resourceVersion: str
    deletionTimestamp: str
    finalizers: list[str]
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]


class Condition(TypedDict, total=False):
    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: int


class RawObject(TypedDict, total=False):
    """A custom resource or a child as the API server sends it (spec and status are the kind's own)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: dict[str, Any]
    status: dict[str, Any]


def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's metadata, or an empty mapping when it has none (or not a mapping)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def name_of(obj: Mapping[str, Any]) -> str:
    return _text(meta_of(obj).get("name"))


def namespace_of(obj: Mapping[str, Any]) -> str:
    """The object's namespace; "" for a cluster-scoped object."""
    return _text(meta_of(obj).get("namespace"))


def key_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)``: how the queue and the caches name an object of a known kind."""
    return namespace_of(obj), name_of(obj)


def uid_of(obj: Mapping[str, Any]) -> str:
    return _text(meta_of(obj).get("uid"))


def resource_version_of(obj: Mapping[str, Any]) -> str:
    return _text(meta_of(obj).get("resourceVersion"))


def generation_of(obj: Mapping[str, Any]) -> int | None:
    generation = meta_of(obj).get("generation")
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else None


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """Whether the object has a deletionTimestamp: it is waiting on its finalizers."""
    return bool(meta_of(obj).get("deletionTimestamp"))


def finalizers_of(obj: Mapping[str, Any]) -> list[str]:
    finalizers = meta_of(obj).get("finalizers")
    return [f for f in finalizers if isinstance(f, str)] if isinstance(finalizers, list) else []


def _string_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return _string_map(meta_of(obj).get("labels"))


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return _string_map(meta_of(obj).get("annotations"))


def owner_references_of(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    refs = meta_of(obj).get("ownerReferences")
    return [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []


def conditions_of(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return [c for c in conditions if isinstance(c, Mapping)] if isinstance(conditions, list) else []


# -- bounds ------------------------------------------------------------------------------------------------

# Where an object too large to keep says so: a top-level key no API object has (the API server prunes
# unknown top-level fields of custom resources), holding how many entries it had and the bound.
OVERSIZE_KEY = "hybrid-operator/oversize"
_ALL = 1 << 62  # a count with no bound
_KEPT_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "finalizers",
    "labels",
    "annotations",
    "ownerReferences",
)


def containers(value: Any) -> Iterator[tuple[Collection[Any], int]]:
    """The children of every mapping (its values) and list in ``value``, with how deep that container sits
    (``value`` itself: 1); iterative, so any depth is walked without recursion. A caller may stop early."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Collection[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        yield children, depth
        stack.extend((child, depth + 1) for child in children if isinstance(child, Mapping | list))


def count_entries(value: Any, limit: int) -> int:
    """How many entries ``value`` holds (each mapping item and list element, at any depth), counting at
    most to ``limit + 1``."""
    count = 0
    for children, _depth in containers(value):
        count += len(children)
        if count > limit:
            break
    return count


def oversize_stub(obj: Mapping[str, Any], entries: int, limit: int) -> dict[str, Any]:
    """What is kept of an object with more than ``limit`` entries: its identity (kind, metadata without
    managedFields), its status conditions, and ``OVERSIZE_KEY``; never its spec."""
    meta = meta_of(obj)
    stub: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in _KEPT_META if k in meta},
        OVERSIZE_KEY: {"entries": entries, "spec": count_entries(obj.get("spec"), _ALL), "limit": limit},
    }
    conditions = conditions_of(obj)
    if conditions:
        stub["status"] = {"conditions": [dict(c) for c in conditions[:20]]}
    return stub


@dataclass(frozen=True)
class Oversize:
    """How large an object was that only its ``oversize_stub`` is left of."""

    entries: int  # in the whole object
    spec: int  # in its spec
    limit: int


def oversize_of(obj: Mapping[str, Any]) -> Oversize | None:
    """What ``oversize_stub`` noted when ``obj`` is what it kept of a larger object, else None."""
    mark = obj.get(OVERSIZE_KEY)
    if not isinstance(mark, Mapping):
        return None
    numbers = [n for n in (mark.get(k) for k in ("entries", "spec", "limit")) if type(n) is int]
    return Oversize(*numbers) if len(numbers) == 3 else None


def bounded(obj: dict[str, Any], limit: int) -> dict[str, Any]:
    """``obj`` itself when it holds at most ``limit`` entries, else its ``oversize_stub`` (counted whole)."""
    if count_entries(obj, limit) <= limit:
        return obj
    return oversize_stub(obj, count_entries(obj, _ALL), limit)
