"""What the operator writes to the objects it reconciles: the status through its subresource and finalizers,
each as a merge patch carrying the resourceVersion it was computed from; and the local merge patch
``reconcile FILE --check`` shows. A fake Kube records each patch."""

from __future__ import annotations

from typing import Any

import pytest

from hybrid_operator.kube.client import KubeObject, Resource
from hybrid_operator.kube.objects import GVK
from hybrid_operator.kube.patching import add_finalizer, merge_patch, patch_status, remove_finalizer

RESOURCE = Resource(GVK("cache.example.com", "v1alpha1", "Memcached"), "memcacheds", True)
OURS = "cache.example.com/finalizer"


class RecordingKube:
    def __init__(self) -> None:
        self.patches: list[tuple[str | None, str, Any, str | None]] = []

    def merge_patch(
        self, res: Resource, namespace: str | None, name: str, patch: Any, sub: str | None = None
    ) -> KubeObject:
        assert res == RESOURCE
        self.patches.append((namespace, name, patch, sub))
        return {"metadata": {"name": name, "resourceVersion": "after"}, "patched": patch}


def cr(finalizers: list[str] | None = None, namespace: str | None = "ns") -> KubeObject:
    meta: dict[str, Any] = {"name": "mc", "resourceVersion": "41"}
    if namespace is not None:
        meta["namespace"] = namespace
    if finalizers is not None:
        meta["finalizers"] = finalizers
    return {"metadata": meta, "spec": {"size": 1}}


def test_status_goes_to_the_subresource_with_the_version_it_was_computed_from() -> None:
    kube = RecordingKube()
    written = patch_status(kube, RESOURCE, cr(), {"observedGeneration": 2})  # type: ignore[arg-type]
    assert kube.patches == [
        ("ns", "mc", {"metadata": {"resourceVersion": "41"}, "status": {"observedGeneration": 2}}, "status")
    ]
    assert written["metadata"]["resourceVersion"] == "after"  # what the server answered, not what we sent


def test_a_cluster_scoped_object_is_patched_without_a_namespace() -> None:
    kube = RecordingKube()
    patch_status(kube, RESOURCE, cr(namespace=None), {"a": 1})  # type: ignore[arg-type]
    assert not kube.patches[0][0]  # None or "": either way the request path names no namespace


def test_our_finalizer_is_added_after_the_others() -> None:
    kube = RecordingKube()
    obj = cr(["someone.else/x"])
    add_finalizer(kube, RESOURCE, obj, OURS)  # type: ignore[arg-type]
    assert kube.patches == [
        ("ns", "mc", {"metadata": {"resourceVersion": "41", "finalizers": ["someone.else/x", OURS]}}, None)
    ]
    assert obj["metadata"]["finalizers"] == ["someone.else/x"]  # what was read is never modified


def test_a_finalizer_already_there_is_not_written_again() -> None:
    kube = RecordingKube()
    obj = cr([OURS])
    assert add_finalizer(kube, RESOURCE, obj, OURS) is obj  # type: ignore[arg-type]
    assert kube.patches == []


def test_only_our_finalizer_is_removed() -> None:
    kube = RecordingKube()
    remove_finalizer(kube, RESOURCE, cr(["a/x", OURS, "b/y"]), OURS)  # type: ignore[arg-type]
    assert kube.patches[0][2] == {"metadata": {"resourceVersion": "41", "finalizers": ["a/x", "b/y"]}}


def test_removing_the_last_finalizer_deletes_the_field() -> None:
    kube = RecordingKube()
    remove_finalizer(kube, RESOURCE, cr([OURS]), OURS)  # type: ignore[arg-type]
    # null in a merge patch removes the field rather than leaving an empty list behind
    assert kube.patches[0][2] == {"metadata": {"resourceVersion": "41", "finalizers": None}}


@pytest.mark.parametrize("finalizers", [None, [], ["someone.else/x"]])
def test_removing_a_finalizer_that_is_not_there_writes_nothing(finalizers: list[str] | None) -> None:
    kube = RecordingKube()
    obj = cr(finalizers)
    assert remove_finalizer(kube, RESOURCE, obj, OURS) is obj  # type: ignore[arg-type]
    assert kube.patches == []


# RFC 7386, appendix A: the test cases of the specification itself.
@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_follows_the_rfc(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


def test_merge_patch_leaves_its_inputs_alone() -> None:
    target = {"status": {"conditions": [{"type": "Running"}], "keep": {"x": 1}}}
    patch = {"status": {"keep": {"y": 2}}}
    merged = merge_patch(target, patch)
    assert merged == {"status": {"conditions": [{"type": "Running"}], "keep": {"x": 1, "y": 2}}}
    assert target == {"status": {"conditions": [{"type": "Running"}], "keep": {"x": 1}}}
    assert patch == {"status": {"keep": {"y": 2}}}
