"""kube/objects.py: every accessor on a well-formed object, on missing fields and on mistyped ones.

An object can hold anything its CRD allows (and a status anything at all), so the accessors must read a
missing or mistyped field as the empty value and never raise: the property tests feed any JSON value into
every field they read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.kube.objects import (
    GVK,
    annotations_of,
    conditions_of,
    finalizers_of,
    generation_of,
    is_deleting,
    key_of,
    labels_of,
    meta_of,
    name_of,
    namespace_of,
    owner_references_of,
    resource_version_of,
    uid_of,
)

OWNER = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Foo", "name": "owner", "uid": "u-0", "controller": True}
WELL_FORMED: dict[str, Any] = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Foo",
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "uid": "u-1",
        "generation": 3,
        "resourceVersion": "4711",
        "deletionTimestamp": "2024-01-02T03:04:05Z",
        "finalizers": ["example.com/cleanup", "other/keep"],
        "labels": {"app": "web"},
        "annotations": {"note": "hi"},
        "ownerReferences": [OWNER],
    },
    "spec": {"size": 1},
    "status": {"conditions": [{"type": "Running", "status": "True"}]},
}

ACCESSORS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "meta_of": meta_of,
    "name_of": name_of,
    "namespace_of": namespace_of,
    "key_of": key_of,
    "uid_of": uid_of,
    "resource_version_of": resource_version_of,
    "generation_of": generation_of,
    "is_deleting": is_deleting,
    "finalizers_of": finalizers_of,
    "labels_of": labels_of,
    "annotations_of": annotations_of,
    "owner_references_of": owner_references_of,
    "conditions_of": conditions_of,
}
EMPTY: dict[str, Any] = {
    "meta_of": {},
    "name_of": "",
    "namespace_of": "",
    "key_of": ("", ""),
    "uid_of": "",
    "resource_version_of": "",
    "generation_of": None,
    "is_deleting": False,
    "finalizers_of": [],
    "labels_of": {},
    "annotations_of": {},
    "owner_references_of": [],
    "conditions_of": [],
}
META_FIELDS = (
    "name",
    "namespace",
    "uid",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "finalizers",
    "labels",
    "annotations",
    "ownerReferences",
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def test_a_well_formed_object() -> None:
    obj = WELL_FORMED
    assert meta_of(obj) is obj["metadata"]
    assert (name_of(obj), namespace_of(obj), key_of(obj)) == ("web", "shop", ("shop", "web"))
    assert (uid_of(obj), resource_version_of(obj), generation_of(obj)) == ("u-1", "4711", 3)
    assert is_deleting(obj)
    assert finalizers_of(obj) == ["example.com/cleanup", "other/keep"]
    assert (labels_of(obj), annotations_of(obj)) == ({"app": "web"}, {"note": "hi"})
    assert owner_references_of(obj) == [OWNER]
    assert conditions_of(obj) == [{"type": "Running", "status": "True"}]


def test_what_an_accessor_returns_is_not_the_object_itself() -> None:
    """Callers extend the lists and maps they read (add_finalizer); the object they read stays as it was."""
    obj = WELL_FORMED
    finalizers_of(obj).append("mine")
    labels_of(obj)["x"] = "y"
    annotations_of(obj)["x"] = "y"
    assert obj["metadata"]["finalizers"] == ["example.com/cleanup", "other/keep"]
    assert obj["metadata"]["labels"] == {"app": "web"}
    assert obj["metadata"]["annotations"] == {"note": "hi"}


@pytest.mark.parametrize(
    "obj",
    [{}, {"metadata": None}, {"metadata": {}}, {"metadata": []}, {"metadata": "web"}, {"metadata": 7}, {"status": []}],
    ids=["no-metadata", "null", "empty", "list", "string", "number", "status-list"],
)
def test_missing_or_mistyped_metadata_reads_as_empty(obj: dict[str, Any]) -> None:
    assert {name: accessor(obj) for name, accessor in ACCESSORS.items()} == EMPTY


@pytest.mark.parametrize("value", [None, 5, 2.5, True, ["web"], {"name": "web"}, ""])
def test_a_mistyped_or_empty_string_field_reads_as_empty(value: Any) -> None:
    obj = {"metadata": {"name": value, "namespace": value, "uid": value, "resourceVersion": value}}
    assert (name_of(obj), namespace_of(obj), uid_of(obj), resource_version_of(obj)) == ("", "", "", "")
    assert key_of(obj) == ("", "")


def test_a_cluster_scoped_object_has_the_empty_namespace() -> None:
    assert key_of({"metadata": {"name": "node-1"}}) == ("", "node-1")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0), (1, 1), (2**62, 2**62), (True, None), (False, None), ("3", None), (3.0, None), (None, None), ([3], None)],
)
def test_generation_is_an_int_and_never_a_bool(value: Any, expected: int | None) -> None:
    assert generation_of({"metadata": {"generation": value}}) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2024-01-02T03:04:05Z", True), ("", False), (None, False), (0, False), ({}, False), ([], False)],
)
def test_deleting_is_a_set_deletion_timestamp(value: Any, expected: bool) -> None:
    assert is_deleting({"metadata": {"deletionTimestamp": value}}) is expected


def test_finalizers_keep_only_strings_in_order() -> None:
    assert finalizers_of({"metadata": {"finalizers": ["b", 1, None, "a", ["c"]]}}) == ["b", "a"]
    assert finalizers_of({"metadata": {"finalizers": "example.com/cleanup"}}) == []  # not a list of one
    assert finalizers_of({"metadata": {"finalizers": {"a": "b"}}}) == []


@pytest.mark.parametrize("accessor", [labels_of, annotations_of])
def test_labels_and_annotations_keep_only_string_values(accessor: Callable[[Mapping[str, Any]], Any]) -> None:
    field = "labels" if accessor is labels_of else "annotations"
    assert accessor({"metadata": {field: {"a": "1", "b": 2, "c": None, "d": ["x"], "e": ""}}}) == {"a": "1", "e": ""}
    assert accessor({"metadata": {field: ["a", "b"]}}) == {}
    assert accessor({"metadata": {field: "a=b"}}) == {}


def test_owner_references_and_conditions_keep_only_mappings() -> None:
    assert owner_references_of({"metadata": {"ownerReferences": [OWNER, "x", 1, None]}}) == [OWNER]
    assert owner_references_of({"metadata": {"ownerReferences": OWNER}}) == []  # one mapping is not a list
    running = {"type": "Running"}
    assert conditions_of({"status": {"conditions": [running, "x", 5, None]}}) == [running]
    for status in ({"conditions": 5}, {"conditions": running}, {"conditions": "Running"}, "Running", None, 5):
        assert conditions_of({"status": status}) == []


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(META_FIELDS), json_values), json_values)
def test_any_json_in_any_metadata_field_never_raises(meta: dict[str, Any], status: Any) -> None:
    obj = {"metadata": meta, "status": status}
    assert isinstance(meta_of(obj), Mapping)
    for text in (name_of(obj), namespace_of(obj), uid_of(obj), resource_version_of(obj)):
        assert isinstance(text, str)
    assert key_of(obj) == (namespace_of(obj), name_of(obj))
    generation = generation_of(obj)
    assert generation is None or (type(generation) is int and generation == meta.get("generation"))
    assert is_deleting(obj) is bool(meta.get("deletionTimestamp"))
    assert all(isinstance(f, str) for f in finalizers_of(obj))
    for strings in (labels_of(obj), annotations_of(obj)):
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in strings.items())
    assert all(isinstance(r, Mapping) for r in owner_references_of(obj))
    assert all(isinstance(c, Mapping) for c in conditions_of(obj))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["apiVersion", "kind", "metadata", "spec", "status"]), json_values))
def test_any_json_in_any_top_level_field_never_raises(obj: dict[str, Any]) -> None:
    for accessor in ACCESSORS.values():
        accessor(obj)
    if not isinstance(obj.get("metadata"), Mapping):
        assert {name: accessor(obj) for name, accessor in ACCESSORS.items() if name != "conditions_of"} == {
            name: value for name, value in EMPTY.items() if name != "conditions_of"
        }


@pytest.mark.parametrize(
    ("gvk", "api_version", "text"),
    [
        (GVK("cache.example.com", "v1alpha1", "Foo"), "cache.example.com/v1alpha1", "Foo.v1alpha1.cache.example.com"),
        (GVK("", "v1", "ConfigMap"), "v1", "ConfigMap.v1"),
    ],
)
def test_gvk_api_version_and_text(gvk: GVK, api_version: str, text: str) -> None:
    assert (gvk.api_version, str(gvk)) == (api_version, text)
