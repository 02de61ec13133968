"""``bench.cloning`` copies a converged Foo: its Deployment as the foo role makes it, its status and record as a
run leaves them, and the children digest as the operator computes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import cloning
from hybrid_operator.reactor.dependents import DependentWatches
from hybrid_operator.reactor.queueing import Key
from hybrid_operator.reactor.resuming import parse_record
from hybrid_operator.settings.watches import Watch, load_watches

NS = "bench-x-restart-100"
GVK = "Foo.v1alpha1.samplecontroller.k8s.io"
CONTENT = "c" * 32


def foo(name: str, uid: str, generation: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": name, "namespace": NS, "uid": uid, "generation": generation},
        "spec": {"deploymentName": name, "replicas": 1},
    }
    if status is not None:
        body["status"] = status
    return body


def deployment(name: str, owner_uid: str, uid: str, generation: int = 1) -> dict[str, Any]:
    labels = {"app": name, "controller": name}
    ref = {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": name, "uid": owner_uid}
    ref |= {"controller": True, "blockOwnerDeletion": True}
    applied = {"metadata": {"name": name, "namespace": NS, "labels": labels, "ownerReferences": [ref]}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid,
            "generation": generation,
            "resourceVersion": "42",
            "creationTimestamp": "2026-11-27T00:00:00Z",
            "managedFields": [{"manager": "OpenAPI-Generator"}],
            "labels": labels,
            "annotations": {
                "deployment.kubernetes.io/revision": "1",
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(applied),
            },
            "ownerReferences": [ref],
        },
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}}},
        "status": {"availableReplicas": 1},
    }


@pytest.fixture
def watch(tmp_path: Path) -> Watch:
    (tmp_path / "roles" / "foo" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "foo" / "tasks" / "main.yml").write_text("---\n[]\n")
    path = tmp_path / "watches.yaml"
    path.write_text(
        "- version: v1alpha1\n  group: samplecontroller.k8s.io\n  kind: Foo\n"
        f"  role: {tmp_path / 'roles' / 'foo'}\n  skipConvergedAtStart: true\n"
    )
    return load_watches(path)[0]


def test_a_copied_deployment_is_what_the_role_sends_for_the_other_foo() -> None:
    template_foo, copy_foo = foo("foo-00000", "uid-template"), foo("foo-00042", "uid-copy")
    body = cloning.clone_deployment(deployment("foo-00000", "uid-template", "d0"), template_foo, copy_foo)
    meta = body["metadata"]
    assert set(meta) == {"name", "namespace", "labels", "annotations", "ownerReferences"}  # no server-set field
    assert meta["name"] == "foo-00042" and meta["labels"] == {"app": "foo-00042", "controller": "foo-00042"}
    refs = [(r["name"], r["uid"], r["controller"]) for r in meta["ownerReferences"]]
    assert refs == [("foo-00042", "uid-copy", True)]
    assert list(meta["annotations"]) == ["kubectl.kubernetes.io/last-applied-configuration"]
    applied = json.loads(meta["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert applied["metadata"]["ownerReferences"][0]["uid"] == "uid-copy"
    assert body["spec"]["selector"]["matchLabels"] == meta["labels"] and "status" not in body


def test_a_copied_status_records_the_copys_generation_and_children() -> None:
    record = {"generation": 1, "content": CONTENT, "children": "a" * 32, "kinds": ["Deployment.v1.apps"]}
    status = {
        "availableReplicas": 1,
        "observedGeneration": 1,
        "conditions": [{"type": "Successful", "status": "True", "message": "foo-00000 done"}],
        "reconciledWith": record,
    }
    template = foo("foo-00000", "uid-template", status=status)
    copied = cloning.clone_status(template, foo("foo-00042", "uid-copy", generation=3), "b" * 32)
    assert parse_record(copied) is not None
    assert copied["reconciledWith"] == {**record, "generation": 3, "children": "b" * 32}
    assert copied["observedGeneration"] == 3 and copied["availableReplicas"] == 1
    assert copied["conditions"][0]["message"] == "foo-00042 done"
    assert template["status"]["reconciledWith"]["generation"] == 1  # the template is left as it was
    with pytest.raises(ValueError, match=r"no status\.reconciledWith"):
        cloning.clone_status(foo("foo-00001", "u"), foo("foo-00043", "v"), "b" * 32)


def test_each_owner_gets_the_operators_digest_of_its_own_children(watch: Watch) -> None:
    a, b = Key(GVK, NS, "foo-00001"), Key(GVK, NS, "foo-00002")
    both = [deployment("foo-00001", "ua", "d1"), deployment("foo-00002", "ub", "d2")]
    digests = cloning.children_digests(watch, both, [a, b])
    assert digests[a] != digests[b]
    assert digests[a] == cloning.children_digests(watch, both[:1], [a])[a]  # others' children do not count
    moved = cloning.children_digests(watch, [deployment("foo-00001", "ua", "d1", generation=2)], [a])
    assert moved[a] != digests[a]  # a scaled Deployment is drift
    nothing = DependentWatches(None, None, [watch], (), None).children_digest(a, [])  # type: ignore[arg-type]
    assert cloning.children_digests(watch, [], [a])[a] == nothing
