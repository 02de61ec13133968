"""Role meta files parsed at the edge: Ansible's format accepted, anything else refused naming the key."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.project.argspecs import (
    MAX_DEPTH,
    MAX_OPTIONS,
    ArgumentSpecError,
    _Where,
    load_role_spec,
    parse_options,
)

ROOT = Path(__file__).resolve().parents[3]


def role(tmp_path: Path, options: Any, operator: Any = None) -> Path:
    (tmp_path / "meta").mkdir(parents=True, exist_ok=True)
    spec = {"argument_specs": {"main": {"short_description": "x", "options": options}}}
    (tmp_path / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(spec))
    if operator is not None:
        (tmp_path / "meta" / "operator.yml").write_text(yaml.safe_dump(operator))
    return tmp_path


def parse(options: Any) -> Any:
    return parse_options(options, _Where(Path("meta/argument_specs.yml"), "main.options"), 0, [0])


def test_the_shipped_roles_parse() -> None:
    foo = load_role_spec(ROOT / "roles" / "foo")
    assert foo is not None
    names = [o.name for o in foo.options]
    assert names[:3] == ["deployment_name", "replicas", "image"]
    replicas = foo.options[1]
    assert (replicas.type, replicas.has_default, replicas.default) == ("int", True, 1)
    assert [o.name for o in foo.status] == ["availableReplicas"]
    vm = load_role_spec(ROOT / "roles" / "virtualmachine")
    assert vm is not None
    resource = vm.options[0]
    assert [o.name for o in resource.options] == ["cpu", "memory", "root_disk"]


def test_a_role_without_argument_specs_has_nothing_to_generate(tmp_path: Path) -> None:
    assert load_role_spec(tmp_path) is None


def test_defaults_of_ansible_are_filled_in() -> None:
    (option,) = parse({"name": {"description": ["one", "two  words"]}})
    assert (option.type, option.required, option.has_default) == ("str", False, False)
    assert option.description == "one two words"


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"a": {"type": "string"}}, "main.options.a.type"),
        ({"a": {"typo": 1}}, "main.options.a.typo"),
        ({"a": {"required": "yes"}}, "main.options.a.required"),
        ({"a": {"required": True, "default": 1}}, "main.options.a"),
        ({"a": {"type": "str", "elements": "str"}}, "main.options.a.elements"),
        ({"a": {"type": "str", "options": {}}}, "main.options.a.options"),
        ({"a": {"choices": []}}, "main.options.a.choices"),
        ({"a": {"choices": [{"x": 1}]}}, "main.options.a.choices.0"),
        ({"a": {"default": float("nan")}}, "main.options.a.default"),
        ({"a": {"description": {"x": 1}}}, "main.options.a.description"),
        ({1: {}}, "main.options"),
        (["a"], "main.options"),
    ],
)
def test_what_is_not_an_argument_spec_is_refused_naming_the_key(options: Any, where: str) -> None:
    with pytest.raises(ArgumentSpecError, match=rf"meta/argument_specs\.yml: {re.escape(where)}: "):
        parse(options)


def test_nesting_and_size_are_bounded() -> None:
    deep: dict[str, Any] = {"leaf": {}}
    for _ in range(MAX_DEPTH + 2):
        deep = {"a": {"type": "dict", "options": deep}}
    with pytest.raises(ArgumentSpecError, match="nested more than"):
        parse(deep)
    with pytest.raises(ArgumentSpecError, match=f"more than {MAX_OPTIONS} options"):
        parse({f"o{i}": {} for i in range(MAX_OPTIONS + 1)})


def test_a_default_made_huge_by_yaml_aliases_is_refused(tmp_path: Path) -> None:
    """Seven lines of anchors would be 10 * 4**6 values if expanded: refused before that."""
    lines = ["anchors:", "  - &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for prev, name in zip("abcdef", "bcdefg", strict=True):
        lines.append(f"  - &{name} [*{prev}, *{prev}, *{prev}, *{prev}]")
    lines += ["argument_specs:", "  main:", "    options:", "      x: {type: list, default: *g}"]
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "argument_specs.yml").write_text("\n".join(lines) + "\n")
    with pytest.raises(ArgumentSpecError, match=r"main\.options\.x\.default: nested more than"):
        load_role_spec(tmp_path)


def test_operator_yml_declares_status_in_the_same_format(tmp_path: Path) -> None:
    spec = load_role_spec(role(tmp_path, {}, {"status": {"options": {"phase": {"choices": ["A", "B"]}}}}))
    assert spec is not None and spec.status[0].choices == ("A", "B")
    with pytest.raises(ArgumentSpecError, match=r"operator\.yml: statuz: unknown key"):
        load_role_spec(role(tmp_path, {}, {"statuz": {}}))


def test_broken_yaml_and_huge_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "argument_specs.yml").write_text("argument_specs: [")
    with pytest.raises(ArgumentSpecError, match="not valid YAML"):
        load_role_spec(tmp_path)
    (tmp_path / "meta" / "argument_specs.yml").write_text("#" * (1 << 21))
    with pytest.raises(ArgumentSpecError, match="bytes, more than"):
        load_role_spec(tmp_path)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_any_value_either_parses_or_is_refused_with_our_error(raw: Any) -> None:
    with contextlib.suppress(ArgumentSpecError):
        parse(raw)


_option = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["str", "int", "bool", "list", "dict", "raw", "float", "bogus"]),
        "required": st.booleans(),
        "default": _json,
        "choices": st.lists(st.integers() | st.text(max_size=4), max_size=3),
        "description": st.text(max_size=20) | st.lists(st.text(max_size=10), max_size=2),
        "elements": st.sampled_from(["str", "dict"]),
    },
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=10), _option, max_size=5))
def test_plausible_specs_either_parse_or_are_refused_with_our_error(options: dict[str, Any]) -> None:
    try:
        parsed = parse(options)
    except ArgumentSpecError:
        return
    assert [o.name for o in parsed] == list(options)
