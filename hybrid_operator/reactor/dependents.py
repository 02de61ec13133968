"""Dependent watches: when a child a role created drifts or disappears, reconcile its owner again.

The API proxy reports each kind a run creates, and each object a run reads that belongs to its owner's kind
(``on_child``: so a restarted operator whose runs only read and patch finds its children again); the first
time a kind shows up for an owner whose watch has ``watchDependentResources`` (and is not blacklisted;
cluster-scoped children only with ``watchClusterScopedResources``), an informer starts for it, in the
watched namespaces. Its events map back to the owner through the controller ownerReference or operator-sdk's
``primary-resource`` annotations. Started and stopped by the lifecycle with what only the leader runs (a
``lifecycle.Runnable``): ``stop`` ends every informer started here.

No reconcile storms (operator-sdk#3950, #4906): creations are ignored (the role just made them), and an
update counts only when it changes what a person declared: the generation for kinds that have one, else
the object without its status and bookkeeping metadata. A role that writes a child with the same
content wakes nobody.

A role that reads its children's status (the foo role reports its Deployment's ``availableReplicas``)
declares it with ``watchDependentStatusChanges``: then a change of a child's ``status`` wakes that owner
too, instead of the owner polling with a timed requeue. Only owners that declare it are woken; status
churn nobody reads still wakes nobody. A kind's informer starts when a run first reports a child of it,
so that child's status may have moved before the informer listed it (a Deployment whose pods came up
while the informer's thread waited for the CPU, on a loaded machine): the children such an informer lists
at its start wake their status-reading owners once. Not those of an informer started for a restart's drift
check (``ensure``): that would wake every owner ``skipConvergedAtStart`` meant to leave alone.

What is kept of a child: nothing here reads a child's body, only its metadata (owner references,
operator-sdk's annotations, generation, deletion mark) and whether its declared content or its status
changed. So unless the run proxy answers reads from the caches (``--proxy-cache-reads``, which needs whole
objects), a dependent informer keeps ``metadata_only``: that metadata plus a digest of each part, a few
hundred bytes where a Deployment takes several KB.

For watches with ``skipConvergedAtStart`` (``resuming``) it also keeps an index of each owner's children
and gives ``children_digest``: what a run left, recorded with it, and compared at the next start.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from hybrid_operator.kube.client import ApiError, Kube, KubeObject
from hybrid_operator.kube.objects import (
    GVK,
    annotations_of,
    generation_of,
    is_deleting,
    meta_of,
    name_of,
    namespace_of,
    owner_references_of,
)
from hybrid_operator.kube.owners import PRIMARY_RESOURCE, PRIMARY_RESOURCE_TYPE, Child
from hybrid_operator.kube.watching import Informer
from hybrid_operator.lifecycle import Loop
from hybrid_operator.proxy.cachereads import Caches
from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, Key, WorkQueue
from hybrid_operator.settings.watches import Watch

log = logging.getLogger(__name__)

_BOOKKEEPING = ("resourceVersion", "managedFields", "generation", "creationTimestamp", "uid", "selfLink")
# What ``metadata_only`` keeps of a child's metadata; of its owner references, what ``owners_of`` reads.
_KEPT_META = ("name", "namespace", "uid", "resourceVersion", "generation", "deletionTimestamp")
_KEPT_REF = ("apiVersion", "kind", "name", "uid")
DECLARED = "declaredDigest"  # in a metadata-only child: the digest of what a person declared


def declared(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a person declared: the object without status and server-side bookkeeping."""
    out = {k: v for k, v in obj.items() if k not in ("status", DECLARED)}
    meta = {k: v for k, v in meta_of(obj).items() if k not in _BOOKKEEPING}
    out["metadata"] = meta
    return out


def digest(value: Any, fallback: str) -> str:
    """A short digest of a JSON value; ``fallback`` (the resourceVersion: any write changes it) for one too
    deep to encode."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    except RecursionError:
        return "rv:" + fallback
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def metadata_only(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a dependent informer keeps of a child: the metadata read here, a digest of its declared content
    (what tells a change of a kind without a generation) and of its status (in place of it)."""
    meta = meta_of(obj)
    kept: dict[str, Any] = {k: meta[k] for k in _KEPT_META if k in meta}
    refs = [{k: r[k] for k in _KEPT_REF if k in r} for r in owner_references_of(obj)]
    if refs:
        kept["ownerReferences"] = refs
    annotations = annotations_of(obj)
    primary = {k: annotations[k] for k in (PRIMARY_RESOURCE, PRIMARY_RESOURCE_TYPE) if k in annotations}
    if primary:
        kept["annotations"] = primary
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept}
    rv = str(meta.get("resourceVersion") or "")
    out[DECLARED] = digest(declared(obj), rv)
    if "status" in obj:
        out["status"] = digest(obj["status"], rv)
    return out


def _declared_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    old_digest, new_digest = old.get(DECLARED), new.get(DECLARED)
    if isinstance(old_digest, str) and isinstance(new_digest, str):
        return old_digest != new_digest  # both metadata-only
    return declared(old) != declared(new)


def significant_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    if is_deleting(new) and not is_deleting(old):
        return True
    old_generation, new_generation = generation_of(old), generation_of(new)
    if old_generation is not None and new_generation is not None:
        return old_generation != new_generation
    return _declared_changed(old, new)


def _gv_of(obj: Mapping[str, Any]) -> str:
    """``version.group`` of an object's apiVersion, as ``str(GVK)`` writes it after the kind."""
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    return f"{version}.{group}" if group else version


class DependentWatches:
    def __init__(
        self,
        kube: Kube,
        queue: WorkQueue,
        watches: list[Watch],
        namespaces: tuple[str, ...],
        stop: threading.Event,
        caches: Caches | None = None,
        *,
        keep_bodies: bool = False,
    ) -> None:
        self.kube = kube
        self.caches = caches  # where the informers started here are offered to the run proxy
        self.keep_bodies = keep_bodies  # whole children (the proxy answers reads from them), else metadata_only
        self.queue = queue
        self.namespaces = namespaces
        self.stopping = stop
        self._by_owner_kind = {(w.gvk.api_version, w.gvk.kind): w for w in watches}
        self._by_kind_group = {(w.gvk.kind, w.gvk.group): w for w in watches}
        self._started: set[GVK] = set()
        self._informers: dict[GVK, list[Informer]] = {}
        self._kinds_of: dict[GVK, set[GVK]] = {}  # an owner kind -> the child kinds its runs touched
        # owner -> its children as (str(GVK), namespace, name); only kept when a watch skips converged objects
        self._children: dict[Key, set[tuple[str, str, str]]] | None = (
            {} if any(w.skip_converged_at_start for w in watches) else None
        )
        self._lock = threading.Lock()

    # -- the lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        pass  # a dependent kind's informers start when a run first reports one (``on_child``)

    def stop(self, deadline: float) -> bool:
        """Stop every informer started here (they share ``stopping``)."""
        self.stopping.set()
        return True

    def ready(self) -> tuple[bool, str]:
        with self._lock:
            started = sum(len(informers) for informers in self._informers.values())
        return True, f"{started} dependent watches"

    def on_child(self, child: Child) -> None:
        watch = self._by_owner_kind.get((child.owner.api_version, child.owner.kind))
        if watch is None or not watch.watch_dependent_resources:
            return
        group, _, version = child.api_version.rpartition("/")
        gvk = GVK(group, version, child.kind)
        if gvk in watch.blacklist:
            return
        if not child.namespaced and not watch.watch_cluster_scoped_resources:
            return  # children in other namespaces are watched as upstream does (in the watched namespaces)
        self._watch_kind(watch, gvk, wake_listed=True)

    def ensure(self, owner_kind: GVK, gvk: GVK) -> None:
        """Watch a child kind an earlier run of ``owner_kind`` recorded (a restart's drift check needs its
        cache before any run reports it again)."""
        watch = self._by_owner_kind.get((owner_kind.api_version, owner_kind.kind))
        if watch is not None and watch.watch_dependent_resources and gvk not in watch.blacklist:
            self._watch_kind(watch, gvk)

    def _watch_kind(self, watch: Watch, gvk: GVK, wake_listed: bool = False) -> None:
        with self._lock:
            self._kinds_of.setdefault(watch.gvk, set()).add(gvk)
            if gvk in self._started or self.stopping.is_set():
                return
            self._started.add(gvk)
        # Resolved in a thread of its own, which ends after one discovery request.
        Loop(f"dependent-{gvk.kind}", lambda _stopping: self._start(gvk, wake_listed), self.stopping).start()

    def _start(self, gvk: GVK, wake_listed: bool = False) -> None:
        try:
            resource = self.kube.resource(gvk)
        except ApiError as exc:
            log.warning("cannot watch dependent %s: %s", gvk, exc)
            with self._lock:
                self._started.discard(gvk)
            return
        namespaces = self.namespaces if resource.namespaced and self.namespaces else ("",)
        informers: list[Informer] = []
        for namespace in namespaces:
            keep = None if self.keep_bodies else metadata_only
            informer = Informer(
                self.kube,
                resource,
                self._listing_handler(wake_listed, informers),
                namespace=namespace,
                stopping=self.stopping,
                keep=keep,
                full=self.keep_bodies,
            )
            informers.append(informer)
            if self.caches is not None:
                self.caches.add(informer)
        with self._lock:
            self._informers[gvk] = informers
        for informer in informers:
            informer.start()
        log.info("watching dependent %s to keep owners converged", gvk)

    # -- what a run left: for skipConvergedAtStart -------------------------------------------------------

    def kinds_of(self, owner_kind: GVK) -> list[str]:
        """The child kinds runs of ``owner_kind`` touched so far, as ``str(GVK)``, sorted."""
        with self._lock:
            return sorted(str(gvk) for gvk in self._kinds_of.get(owner_kind, ()))

    def synced(self, kinds: list[str]) -> bool:
        """Whether the informers of every one of ``kinds`` (``str(GVK)``) have listed and are healthy."""
        with self._lock:
            by_name = {str(gvk): informers for gvk, informers in self._informers.items()}
        for kind in kinds:
            informers = by_name.get(kind)
            if not informers or not all(i.synced.is_set() and i.health()[0] for i in informers):
                return False
        return True

    def children_digest(self, owner: Key, kinds: list[str]) -> str:
        """A digest of ``owner``'s children of ``kinds`` as the caches hold them: each one's kind, name and
        uid, its generation (what a change of a kind with one moves) or the digest of what it declares, and
        its deletion mark. A child created, deleted or changed since changes it; status churn does not."""
        if self._children is None:
            return digest([], "")
        with self._lock:
            entries = sorted(e for e in self._children.get(owner, ()) if e[0] in kinds)
            by_name = {str(gvk): informers for gvk, informers in self._informers.items()}
        parts = []
        for kind, namespace, name in entries:
            informer = next((i for i in by_name.get(kind, ()) if i.namespace in ("", namespace)), None)
            child = informer.get(namespace, name) if informer is not None else None
            if child is None:
                continue
            generation = generation_of(child)
            meta = meta_of(child)
            declared_content = child.get(DECLARED)
            if generation is None and not isinstance(declared_content, str):
                declared_content = digest(declared(child), str(meta.get("resourceVersion") or ""))
            parts.append([kind, namespace, name, meta.get("uid"), generation or declared_content, is_deleting(child)])
        return digest(parts, "")

    def _index(self, event_type: str, old: KubeObject | None, new: KubeObject) -> None:
        """Keep each owner's set of children as the events tell."""
        assert self._children is not None
        entry = (f"{new.get('kind')}.{_gv_of(new)}", namespace_of(new), name_of(new))
        before = set(self.owners_of(old)) if old is not None else set()
        after = set(self.owners_of(new)) if event_type != "DELETED" else set()
        with self._lock:
            for owner in before - after:
                children = self._children.get(owner)
                if children is not None:
                    children.discard(entry)
                    if not children:
                        del self._children[owner]
            for owner in after:
                self._children.setdefault(owner, set()).add(entry)

    def _listing_handler(
        self, wake_listed: bool, informers: list[Informer]
    ) -> Callable[[str, KubeObject | None, KubeObject], None]:
        """The handler of the informer about to be appended to ``informers``: ``_handle``, told whether an
        event is one of the informer's first listing and ``wake_listed``."""
        index = len(informers)

        def handle(event_type: str, old: KubeObject | None, new: KubeObject) -> None:
            listing = wake_listed and index < len(informers) and not informers[index].synced.is_set()
            self._handle(event_type, old, new, listed_at_start=listing)

        return handle

    def _handle(self, event_type: str, old: KubeObject | None, new: KubeObject, listed_at_start: bool = False) -> None:
        if self._children is not None:
            self._index(event_type, old, new)
        if event_type == "ADDED":
            if listed_at_start and new.get("status"):  # its status may have moved before this watch began
                for key in self.owners_of(new, status_readers_only=True):
                    self.queue.add(key, priority=PRIORITY_CHANGE)
            return
        if event_type == "MODIFIED" and (old is None or not significant_change(old, new)):
            if old is None or old.get("status") == new.get("status"):
                return
            keys = self.owners_of(new, status_readers_only=True)  # a status change: only owners that read it
        else:
            keys = self.owners_of(new)
        for key in keys:
            self.queue.add(key, priority=PRIORITY_CHANGE)

    def owners_of(self, obj: KubeObject, status_readers_only: bool = False) -> list[Key]:
        """The owners to reconcile for a change of ``obj``; with ``status_readers_only``, only those whose
        watch has ``watchDependentStatusChanges``."""
        namespace = namespace_of(obj)  # an owner reference names an object of the child's own namespace
        keys = []
        for ref in owner_references_of(obj):
            # Any owner reference of a watched kind, controller or not, as upstream's EnqueueRequestForOwner:
            # children made by operator-sdk (which sets no controller flag) keep their owners.
            watch = self._by_owner_kind.get((ref.get("apiVersion", ""), ref.get("kind", "")))
            if watch is not None and self._wakes(watch, status_readers_only):
                keys.append(Key(str(watch.gvk), namespace, str(ref.get("name"))))
        annotations = annotations_of(obj)
        primary, primary_type = annotations.get(PRIMARY_RESOURCE), annotations.get(PRIMARY_RESOURCE_TYPE)
        if primary and primary_type:
            kind, _, group = primary_type.partition(".")
            watch = self._by_kind_group.get((kind, group))
            primary_namespace, _, name = primary.rpartition("/")
            if watch is not None and self._wakes(watch, status_readers_only) and name:
                keys.append(Key(str(watch.gvk), primary_namespace, name))
        return keys

    @staticmethod
    def _wakes(watch: Watch, status_readers_only: bool) -> bool:
        return watch.watch_dependent_resources and (watch.watch_dependent_status_changes or not status_readers_only)
