"""reconcile FILE's input: the file is untrusted like any custom resource, parsed with bounds at the edge."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.errors import ConfigError
from hybrid_operator.kube.objects import GVK
from hybrid_operator.kube.patching import merge_patch
from hybrid_operator.reactor.oneshot import MAX_FILE_BYTES, load_object, watch_for
from hybrid_operator.settings.watches import Target, Watch

FOO = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: a\nspec:\n  replicas: 1\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cr.yaml"
    path.write_text(text)
    return path


def test_one_object_is_read(tmp_path: Path) -> None:
    assert load_object(write(tmp_path, "---\n" + FOO))["spec"] == {"replicas": 1}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (FOO + "---\n" + FOO, "found 2 documents"),
        ("", "found 0 documents"),
        ("- a\n", "expected one object"),
        ("kind: Foo\nmetadata: {name: a}\n", "'apiVersion' is required"),
        ("apiVersion: v1\nkind: Foo\nmetadata: {}\n", "'metadata.name' is required"),
        ("apiVersion: v1\nkind: Foo\nmetadata: {name: [a]}\n", "'metadata.name' is required"),
        (FOO + "  when: 2024-01-01\n", "not JSON"),
        ("apiVersion: [", "not valid YAML"),
        ("apiVersion: v1\nkind: Foo\nmetadata: {name: a}\nspec: " + "[" * 150 + "]" * 150 + "\n", "nested more"),
    ],
)
def test_what_is_not_one_resource_is_refused_naming_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_object(write(tmp_path, text))


def test_a_file_larger_than_the_api_server_takes_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(ConfigError, match="more than"):
        load_object(path)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_an_object_or_a_config_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cr.yaml"
        path.write_text(text)
        try:
            obj = load_object(path)
        except ConfigError:
            return
        assert isinstance(obj["metadata"]["name"], str) and isinstance(obj["kind"], str)


def test_the_watch_is_found_by_api_version_and_kind() -> None:
    watch = Watch(gvk=GVK("samplecontroller.k8s.io", "v1alpha1", "Foo"), target=Target(role="foo"))
    assert watch_for([watch], yaml.safe_load(FOO)) is watch
    with pytest.raises(ConfigError, match="no entry of the watches file maps Bar"):
        watch_for([watch], {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Bar"})


def test_merge_patch_is_rfc_7386() -> None:
    assert merge_patch({"a": 1, "b": {"c": 1, "d": 2}, "e": [1]}, {"b": {"c": None, "x": 3}, "e": [2], "f": 0}) == {
        "a": 1,
        "b": {"d": 2, "x": 3},
        "e": [2],
        "f": 0,
    }
