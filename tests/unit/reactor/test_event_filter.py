"""wants_reconcile: which watch events are worth a run (new objects, generations, deletion, annotations)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hybrid_operator.kube.objects import GVK
from hybrid_operator.reactor.annotations import RECONCILE_PERIOD as PERIOD_ANNOTATION
from hybrid_operator.reactor.filtering import wants_reconcile
from hybrid_operator.settings.watches import Target, Watch

PLAIN = Watch(gvk=GVK("cache.example.com", "v1alpha1", "Memcached"), target=Target(role="memcached"))
ANNOTATIONS = Watch(gvk=PLAIN.gvk, target=PLAIN.target, watch_annotations_changes=True)


def memcached(**meta: Any) -> dict[str, Any]:
    metadata = {"name": "web", "namespace": "shop", "generation": 1, "resourceVersion": "100", **meta}
    return {"metadata": metadata, "spec": {"size": 1}}


def changed(obj: dict[str, Any], **meta: Any) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["metadata"].update(meta)
    new["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
    return new


@pytest.mark.parametrize("watch", [PLAIN, ANNOTATIONS])
def test_added_is_reconciled(watch: Watch) -> None:
    assert wants_reconcile(watch, "ADDED", None, memcached())
    assert wants_reconcile(watch, "ADDED", memcached(), memcached())  # a relist re-announces what it has


def test_modified_without_an_old_copy_is_reconciled() -> None:
    assert wants_reconcile(PLAIN, "MODIFIED", None, memcached())


def test_status_only_change_is_not() -> None:
    old = memcached()
    new = changed(old)
    new["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    assert not wants_reconcile(PLAIN, "MODIFIED", old, new)


def test_label_or_finalizer_change_is_not() -> None:
    old = memcached()
    assert not wants_reconcile(PLAIN, "MODIFIED", old, changed(old, labels={"tier": "cache"}))
    assert not wants_reconcile(PLAIN, "MODIFIED", old, changed(old, finalizers=["cache.example.com/cleanup"]))


def test_new_generation_is_reconciled() -> None:
    old = memcached()
    new = changed(old, generation=2)
    new["spec"]["size"] = 3
    assert wants_reconcile(PLAIN, "MODIFIED", old, new)


def test_deletion_mark_is_reconciled() -> None:
    old = memcached(finalizers=["cache.example.com/cleanup"])
    new = changed(old, deletionTimestamp="2030-01-01T00:00:00Z")
    assert wants_reconcile(PLAIN, "MODIFIED", old, new)
    later = changed(new)  # the same deletion mark seen again: nothing new
    assert not wants_reconcile(PLAIN, "MODIFIED", new, later)


def test_annotation_change_only_when_the_watch_asks() -> None:
    old = memcached(annotations={"team": "a"})
    new = changed(old, annotations={"team": "b"})
    assert not wants_reconcile(PLAIN, "MODIFIED", old, new)
    assert wants_reconcile(ANNOTATIONS, "MODIFIED", old, new)
    assert not wants_reconcile(ANNOTATIONS, "MODIFIED", old, changed(old))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({}, {PERIOD_ANNOTATION: "5m"}),
        ({PERIOD_ANNOTATION: "5m"}, {PERIOD_ANNOTATION: "1h"}),
        ({PERIOD_ANNOTATION: "5m"}, {}),
    ],
)
def test_reconcile_period_annotation_change_is_reconciled(before: dict[str, str], after: dict[str, str]) -> None:
    old = memcached(annotations=before)
    assert wants_reconcile(PLAIN, "MODIFIED", old, changed(old, annotations=after))


@pytest.mark.parametrize("watch", [PLAIN, ANNOTATIONS])
def test_deleted_is_not(watch: Watch) -> None:
    obj = memcached(deletionTimestamp="2030-01-01T00:00:00Z")
    assert not wants_reconcile(watch, "DELETED", obj, obj)
    assert not wants_reconcile(watch, "DELETED", None, obj)


def test_objects_converged_before_start_go_after_new_work() -> None:
    from hybrid_operator.reactor.filtering import event_priority
    from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, PRIORITY_RESYNC

    converged = {"metadata": {"generation": 3}, "status": {"observedGeneration": 3}}
    stale = {"metadata": {"generation": 4}, "status": {"observedGeneration": 3}}
    new = {"metadata": {"generation": 1}}
    assert event_priority("ADDED", converged) == PRIORITY_RESYNC
    assert event_priority("ADDED", stale) == PRIORITY_CHANGE
    assert event_priority("ADDED", new) == PRIORITY_CHANGE
    assert event_priority("MODIFIED", converged) == PRIORITY_CHANGE


SECRETS = Watch(gvk=GVK("", "v1", "Secret"), target=Target(role="secret"), manage_status=False)


def secret(data: dict[str, str], rv: str = "1", **meta: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "resourceVersion": rv, **meta},
        "data": data,
    }


def test_kinds_without_generation_run_when_their_content_changes() -> None:
    """A watched Secret's data changed: upstream's NoGenerationPredicate reacts, and so do we."""
    assert wants_reconcile(SECRETS, "MODIFIED", secret({"a": "MQ=="}), secret({"a": "Mg=="}, rv="2"))
    assert wants_reconcile(SECRETS, "MODIFIED", secret({}), secret({}, rv="2", labels={"x": "y"}))


def test_kinds_without_generation_ignore_bookkeeping_only_updates() -> None:
    old = secret({"a": "MQ=="})
    assert not wants_reconcile(SECRETS, "MODIFIED", old, secret({"a": "MQ=="}, rv="2", managedFields=[{}]))
    with_status = {**secret({"a": "MQ=="}, rv="3"), "status": {"seen": True}}
    assert not wants_reconcile(SECRETS, "MODIFIED", old, with_status)
