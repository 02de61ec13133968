"""Dependent watches: which children map back to which owners, and which kinds get a watch."""

from __future__ import annotations

import json
import threading
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hybrid_operator.kube.client import Resource
from hybrid_operator.kube.objects import GVK
from hybrid_operator.kube.owners import PRIMARY_RESOURCE, PRIMARY_RESOURCE_TYPE, Child, Owner, owned_by_kind
from hybrid_operator.kube.watching import Informer
from hybrid_operator.reactor.dependents import DECLARED, DependentWatches, metadata_only, significant_change
from hybrid_operator.reactor.queueing import Key, WorkQueue
from hybrid_operator.settings.watches import Target, Watch

MEMCACHED = Watch(gvk=GVK("cache.example.com", "v1alpha1", "Memcached"), target=Target(role="memcached"))
CLUSTER = Watch(
    gvk=GVK("cache.example.com", "v1alpha1", "Other"), target=Target(role="other"), watch_cluster_scoped_resources=True
)
OWNER = Owner("cache.example.com/v1alpha1", "Memcached", "m", "ns1", "uid-1")


def child(namespaced: bool, same_namespace: bool, owner: Owner = OWNER) -> Child:
    return Child("apps/v1", "Deployment", namespaced, same_namespace, owner)


def deployment(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns1", **meta}}


def test_owner_references_without_the_controller_flag_still_map_to_their_owner() -> None:
    """Children made by operator-sdk carry no controller flag; a migrated operator must keep them."""
    watches = DependentWatches(None, WorkQueue(global_limit=1, per_kind_limits={}), [MEMCACHED], (), threading.Event())  # type: ignore[arg-type]
    ref = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "m", "uid": "u"}
    assert watches.owners_of(deployment(ownerReferences=[ref])) == [Key(str(MEMCACHED.gvk), "ns1", "m")]
    assert watches.owners_of(deployment(ownerReferences=[{**ref, "controller": True}])) == [
        Key(str(MEMCACHED.gvk), "ns1", "m")
    ]
    other = {**ref, "kind": "Unwatched"}
    assert watches.owners_of(deployment(ownerReferences=[other])) == []


def test_the_primary_resource_annotation_maps_across_namespaces() -> None:
    watches = DependentWatches(None, WorkQueue(global_limit=1, per_kind_limits={}), [MEMCACHED], (), threading.Event())  # type: ignore[arg-type]
    annotated = deployment(
        annotations={PRIMARY_RESOURCE: "ns1/m", PRIMARY_RESOURCE_TYPE: "Memcached.cache.example.com"}, namespace="ns2"
    )
    assert watches.owners_of(annotated) == [Key(str(MEMCACHED.gvk), "ns1", "m")]


def test_namespaced_children_elsewhere_are_watched_cluster_scoped_only_when_asked() -> None:
    def watched_after(watch: Watch, new: Child) -> set[GVK]:
        deps = DependentWatches(None, WorkQueue(global_limit=1, per_kind_limits={}), [watch], (), threading.Event())  # type: ignore[arg-type]
        deps._start = lambda gvk: None  # type: ignore[method-assign]
        deps.on_child(new)
        return deps._started

    deployments = {GVK("apps", "v1", "Deployment")}
    assert watched_after(MEMCACHED, child(namespaced=True, same_namespace=False)) == deployments
    assert watched_after(MEMCACHED, child(namespaced=False, same_namespace=False)) == set()
    other_owner = Owner("cache.example.com/v1alpha1", "Other", "o", "ns1", "uid-2")
    assert watched_after(CLUSTER, child(namespaced=False, same_namespace=False, owner=other_owner)) == deployments


def test_a_read_object_belongs_to_the_owner_kind_by_reference_or_annotation() -> None:
    ref = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "other", "uid": "x"}
    assert owned_by_kind(deployment(ownerReferences=[ref]), OWNER)
    assert owned_by_kind(deployment(annotations={PRIMARY_RESOURCE_TYPE: "Memcached.cache.example.com"}), OWNER)
    assert not owned_by_kind(deployment(), OWNER)
    assert not owned_by_kind(deployment(ownerReferences=[{**ref, "apiVersion": "cache.example.com/v2"}]), OWNER)
    assert not owned_by_kind({"metadata": "junk"}, OWNER)
    assert not owned_by_kind(deployment(ownerReferences="junk", annotations=["junk"]), OWNER)


def _queued(queue: WorkQueue) -> list[Key]:
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def test_a_status_change_wakes_only_owners_that_read_their_childrens_status() -> None:
    """``watchDependentStatusChanges``: a Deployment's availableReplicas wakes a Foo that declared it;
    without it, status churn wakes nobody (no storms)."""
    readers = Watch(gvk=MEMCACHED.gvk, target=MEMCACHED.target, watch_dependent_status_changes=True)
    ref = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "m", "uid": "u"}
    old = {**deployment(ownerReferences=[ref], generation=1), "status": {"availableReplicas": 0}}
    new = {**old, "status": {"availableReplicas": 1}}
    for watch, expected in ((readers, [Key(str(MEMCACHED.gvk), "ns1", "m")]), (MEMCACHED, [])):
        queue = WorkQueue(global_limit=1, per_kind_limits={})
        watches = DependentWatches(None, queue, [watch], (), threading.Event())  # type: ignore[arg-type]
        watches._handle("MODIFIED", old, new)
        assert _queued(queue) == expected
        watches._handle("MODIFIED", old, {**old})  # nothing changed at all: nobody, declared or not
        assert _queued(queue) == []


# -- what a dependent informer keeps --------------------------------------------------------------------

REF = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "m", "uid": "u", "controller": True}
LABELS = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["a", "b"]), max_size=2)
CHILDREN = st.fixed_dictionaries(
    {
        "apiVersion": st.just("v1"),
        "kind": st.just("ConfigMap"),
        "metadata": st.fixed_dictionaries(
            {
                "name": st.just("c"),
                "namespace": st.just("ns1"),
                "resourceVersion": st.sampled_from(["1", "2", "3"]),
                "labels": LABELS,
                "ownerReferences": st.just([REF]),
            },
            optional={
                "generation": st.integers(1, 3),
                "deletionTimestamp": st.just("2026-01-01T00:00:00Z"),
                "managedFields": st.just([{"manager": "x"}]),
            },
        ),
        "data": st.dictionaries(st.sampled_from(["k", "l"]), st.sampled_from(["1", "2"]), max_size=2),
    },
    optional={"status": st.dictionaries(st.sampled_from(["ready", "n"]), st.integers(0, 2), max_size=2)},
)


@given(CHILDREN, CHILDREN)
def test_a_metadata_only_child_tells_the_same_changes_as_the_whole_one(old: dict[str, Any], new: Any) -> None:
    """A differential test: what wakes an owner is the same whether the informer kept the whole child or
    ``metadata_only``."""
    kept_old, kept_new = metadata_only(old), metadata_only(new)
    assert significant_change(kept_old, kept_new) == significant_change(old, new)
    assert (kept_old.get("status") == kept_new.get("status")) == (old.get("status") == new.get("status"))
    watches = DependentWatches(None, WorkQueue(global_limit=1, per_kind_limits={}), [MEMCACHED], (), threading.Event())  # type: ignore[arg-type]
    assert watches.owners_of(kept_new) == watches.owners_of(new)


def test_metadata_only_keeps_what_is_read_and_drops_the_body() -> None:
    annotations = {PRIMARY_RESOURCE: "ns1/m", PRIMARY_RESOURCE_TYPE: "Memcached.cache.example.com", "big": "x" * 1000}
    whole = {
        **deployment(ownerReferences=[REF], generation=4, uid="u1", resourceVersion="9", annotations=annotations),
        "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx"}] * 20}}},
        "status": {"availableReplicas": 2},
    }
    kept = metadata_only(whole)
    assert kept["metadata"] == {
        "name": "d",
        "namespace": "ns1",
        "uid": "u1",
        "resourceVersion": "9",
        "generation": 4,
        "ownerReferences": [{k: v for k, v in REF.items() if k != "controller"}],
        "annotations": {PRIMARY_RESOURCE: "ns1/m", PRIMARY_RESOURCE_TYPE: "Memcached.cache.example.com"},
    }
    assert "spec" not in kept and isinstance(kept[DECLARED], str)
    assert isinstance(kept["status"], str)
    assert len(json.dumps(kept)) < len(json.dumps(whole)) / 3


def test_a_child_too_deep_to_digest_changes_with_every_write() -> None:
    node: dict[str, Any] = {}
    body = {**deployment(resourceVersion="5"), "data": node}
    for _ in range(20_000):
        node["a"] = {}
        node = node["a"]
    kept = metadata_only(body)
    assert kept[DECLARED] == "rv:5"
    assert significant_change(kept, metadata_only({**body, "metadata": {**body["metadata"], "resourceVersion": "6"}}))


# -- what a run left, for skipConvergedAtStart ------------------------------------------------------------

SKIPPING = Watch(gvk=MEMCACHED.gvk, target=MEMCACHED.target, skip_converged_at_start=True)
DEPLOYMENT_GVK = GVK("apps", "v1", "Deployment")
OWNER_KEY = Key(str(MEMCACHED.gvk), "ns1", "m")


def children_world() -> tuple[DependentWatches, Informer]:
    deps = DependentWatches(None, WorkQueue(global_limit=1, per_kind_limits={}), [SKIPPING], (), threading.Event())  # type: ignore[arg-type]
    informer = Informer(None, Resource(DEPLOYMENT_GVK, "deployments", True), deps._handle, keep=metadata_only)  # type: ignore[arg-type]
    deps._informers[DEPLOYMENT_GVK] = [informer]
    deps._kinds_of[MEMCACHED.gvk] = {DEPLOYMENT_GVK}
    informer.synced.set()
    return deps, informer


def owned(name: str, generation: int = 1, **extra: Any) -> dict[str, Any]:
    return {**deployment(name=name, ownerReferences=[REF], generation=generation, uid=f"u-{name}"), **extra}


def test_the_childrens_digest_moves_with_what_a_person_changes_and_not_with_status() -> None:
    deps, informer = children_world()
    assert deps.kinds_of(MEMCACHED.gvk) == ["Deployment.v1.apps"] and deps.synced(["Deployment.v1.apps"])
    informer._apply("ADDED", owned("web", status={"availableReplicas": 0}))
    first = deps.children_digest(OWNER_KEY, ["Deployment.v1.apps"])
    informer._apply("MODIFIED", owned("web", status={"availableReplicas": 1}))
    assert deps.children_digest(OWNER_KEY, ["Deployment.v1.apps"]) == first
    digests = {first}
    informer._apply("MODIFIED", owned("web", generation=2))  # someone scaled it
    digests.add(deps.children_digest(OWNER_KEY, ["Deployment.v1.apps"]))
    informer._apply("ADDED", owned("extra"))  # a child appeared
    digests.add(deps.children_digest(OWNER_KEY, ["Deployment.v1.apps"]))
    informer._apply("DELETED", owned("extra"))
    informer._apply("DELETED", owned("web", generation=2))  # a child disappeared
    digests.add(deps.children_digest(OWNER_KEY, ["Deployment.v1.apps"]))
    assert len(digests) == 4
    assert deps._children == {}  # an owner without children is forgotten


def test_children_of_other_owners_and_kinds_do_not_count() -> None:
    deps, informer = children_world()
    informer._apply("ADDED", owned("web"))
    mine = deps.children_digest(OWNER_KEY, ["Deployment.v1.apps"])
    other = {**REF, "name": "other", "uid": "u2"}
    informer._apply("ADDED", {**deployment(name="theirs", ownerReferences=[other], generation=7)})
    assert deps.children_digest(OWNER_KEY, ["Deployment.v1.apps"]) == mine
    assert deps.children_digest(OWNER_KEY, []) != mine


def test_unknown_or_unsynced_kinds_are_not_synced() -> None:
    deps, informer = children_world()
    assert not deps.synced(["ConfigMap.v1"])
    informer.synced.clear()
    assert not deps.synced(["Deployment.v1.apps"])
    assert deps.synced([])


def test_no_index_is_kept_unless_a_watch_skips() -> None:
    deps = DependentWatches(None, WorkQueue(global_limit=1, per_kind_limits={}), [MEMCACHED], (), threading.Event())  # type: ignore[arg-type]
    deps._handle("ADDED", None, owned("web"))
    assert deps._children is None


def _reader_world(wake_listed: bool) -> tuple[DependentWatches, WorkQueue, Informer]:
    readers = Watch(gvk=MEMCACHED.gvk, target=MEMCACHED.target, watch_dependent_status_changes=True)
    queue = WorkQueue(global_limit=1, per_kind_limits={})
    deps = DependentWatches(None, queue, [readers], (), threading.Event())  # type: ignore[arg-type]
    informers: list[Informer] = []
    handler = deps._listing_handler(wake_listed, informers)
    informer = Informer(None, Resource(DEPLOYMENT_GVK, "deployments", True), handler, keep=metadata_only)  # type: ignore[arg-type]
    informers.append(informer)
    return deps, queue, informer


def test_a_child_listed_as_its_kinds_watch_begins_wakes_an_owner_that_reads_its_status() -> None:
    """A run reports a Deployment, and the Deployment informer starts in a thread of its own: the pods may
    come up before it lists (a loaded machine). What it lists at its start then wakes the owners that read
    their children's status, once; a child created later (a live ADDED) wakes nobody, as before."""
    _deps, queue, informer = _reader_world(wake_listed=True)
    informer._apply("ADDED", owned("web", status={"availableReplicas": 2}))
    assert _queued(queue) == [OWNER_KEY]
    informer._apply("ADDED", owned("bare"))  # no status yet: nothing can have been missed
    assert _queued(queue) == []
    informer.synced.set()
    informer._apply("ADDED", owned("later", status={"availableReplicas": 1}))
    assert _queued(queue) == []


def test_a_restarts_drift_check_informer_wakes_nobody_with_what_it_lists() -> None:
    """``ensure`` (a restart's ``skipConvergedAtStart`` check) starts informers too: their listing must not
    wake the owners that check means to leave alone."""
    _deps, queue, informer = _reader_world(wake_listed=False)
    informer._apply("ADDED", owned("web", status={"availableReplicas": 2}))
    assert _queued(queue) == []
