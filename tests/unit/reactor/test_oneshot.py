"""reconcile FILE's input: the file is untrusted like any custom resource, parsed with bounds at the edge."""

from __future__ import annotations

import tempfile
import time
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


def alias_bomb() -> str:
    """A Foo whose spec is the "billion laughs": nine levels of nine aliases, 9**9 strings once expanded."""
    levels = ['  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"  {name}: &{name} [{','.join(['*' + prev] * 9)}]\n")
    return "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: a}\nspec:\n" + "".join(levels)


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
        (FOO + "  x: .nan\n", "not JSON"),
        ("apiVersion: [", "not valid YAML"),
        ("apiVersion: v1\nkind: Foo\nmetadata: {name: a}\nspec: " + "[" * 150 + "]" * 150 + "\n", "nested deeper"),
        (FOO + "  x: &x 1\n  y: *x\n", "anchors and aliases"),
        (FOO + "  x: !!python/object:os.system {}\n", "tag .* is not allowed"),
        (FOO + "  x: !!binary aGk=\n", "tag .* is not allowed"),
        (FOO + "  replicas: 2\n", "duplicate key 'replicas'"),
    ],
)
def test_what_is_not_one_resource_is_refused_naming_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_object(write(tmp_path, text))


def test_the_alias_bomb_is_refused_at_once_in_one_line(tmp_path: Path) -> None:
    text = alias_bomb()
    assert len(text) < 500  # a few hundred bytes that would expand to hundreds of millions of strings
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"anchors and aliases .* are not allowed at spec\.a") as caught:
        load_object(write(tmp_path, text))
    assert time.monotonic() - start < 1.0
    assert "\n" not in str(caught.value) and "line 5" in str(caught.value)


def test_dates_stay_strings_as_kubectl_sends_them(tmp_path: Path) -> None:
    assert load_object(write(tmp_path, FOO + "  when: 2024-01-01\n"))["spec"]["when"] == "2024-01-01"


def test_empty_documents_around_the_object_are_ignored(tmp_path: Path) -> None:
    assert load_object(write(tmp_path, "---\n" + FOO + "---\n"))["metadata"]["name"] == "a"


def test_text_that_is_not_utf8_is_refused_naming_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "cr.yaml"
    path.write_bytes(FOO.encode() + b"  x: \xff\n")
    with pytest.raises(ConfigError, match=f"not UTF-8 text \\(byte offset {len(FOO) + 5}"):
        load_object(path)


@settings(max_examples=100, deadline=None)
@given(
    anchor=st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True),
    field=st.sampled_from(["spec", "metadata"]),
    uses=st.integers(min_value=0, max_value=20),
)
def test_any_anchor_or_alias_is_refused_wherever_it_is(anchor: str, field: str, uses: int) -> None:
    aliases = "".join(f"    u{i}: *{anchor}\n" for i in range(uses))
    text = f"apiVersion: v1\nkind: Foo\n{field}:\n    name: &{anchor} a\n{aliases}"
    if field == "spec":
        text += "metadata: {name: a}\n"
    with tempfile.TemporaryDirectory() as tmp, pytest.raises(ConfigError, match="anchors and aliases"):
        load_object(write(Path(tmp), text))


def test_a_file_larger_than_the_api_server_takes_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(ConfigError, match="over the limit of 3 MiB"):
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
