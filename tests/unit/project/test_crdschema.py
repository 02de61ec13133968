"""Argument-spec options to OpenAPI: types, required, defaults, enums, names as the operator reads them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybrid_operator.ansible import naming
from hybrid_operator.project.argspecs import ArgumentSpecError, Option, RoleSpec
from hybrid_operator.project.crdschema import (
    OPERATOR_STATUS,
    describe,
    spec_options,
    spec_schema,
    status_schema,
    to_camel,
)

RESERVED = frozenset({"hostvars", "item", "omit", "lookup"})


def spec_of(*options: Option) -> dict[str, Any]:
    return spec_schema(options, snake_case=True, where="roles/x/meta")


def test_every_type_and_its_keywords() -> None:
    schema = spec_of(
        Option("deployment_name", "str", "spec.deploymentName. Its name.", required=True),
        Option("replicas", "int", has_default=True, default=1),
        Option("ratio", "float"),
        Option("enabled", "bool", has_default=True, default=False),
        Option("mode", "str", choices=("a", "b"), has_default=True, default="a"),
        Option("ports", "list", elements="int", choices=(80, 443)),
        Option("anything", "list"),
        Option("labels", "dict"),
        Option("blob", "raw"),
        Option("size", "bytes"),
        Option("volumes", "list", elements="dict", options=(Option("mount_path", "path", required=True),)),
        Option("resource", "dict", options=(Option("cpu", "int"), Option("root_disk", "str"))),
    )
    props = schema["properties"]
    assert schema["required"] == ["deploymentName"]
    assert props["deploymentName"] == {"type": "string", "description": "Its name."}
    assert props["replicas"] == {"type": "integer", "default": 1}
    assert props["ratio"] == {"type": "number"}
    assert props["enabled"] == {"type": "boolean", "default": False}
    assert props["mode"] == {"type": "string", "enum": ["a", "b"], "default": "a"}
    assert props["ports"] == {"type": "array", "items": {"type": "integer", "enum": [80, 443]}}
    assert props["anything"] == {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}}
    assert props["labels"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert props["blob"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert props["size"] == {"x-kubernetes-int-or-string": True}
    assert props["volumes"]["items"] == {
        "type": "object",
        "properties": {"mountPath": {"type": "string"}},
        "required": ["mountPath"],
    }
    assert list(props["resource"]["properties"]) == ["cpu", "rootDisk"]


def test_keys_stay_as_written_when_the_watch_does_not_snake_case() -> None:
    schema = spec_schema((Option("deployment_name"),), snake_case=False, where="w")
    assert list(schema["properties"]) == ["deployment_name"]


def test_an_option_whose_camel_case_comes_back_different_is_refused() -> None:
    with pytest.raises(ArgumentSpecError, match="name the option 'http_url'"):
        spec_of(Option("h_t_t_p_url"))


def test_defaults_and_choices_take_the_fields_type() -> None:
    assert spec_of(Option("tag", "str", has_default=True, default=5))["properties"]["tag"]["default"] == "5"
    with pytest.raises(ArgumentSpecError, match=r"spec\.count: 'many' is not a int"):
        spec_of(Option("count", "int", has_default=True, default="many"))
    with pytest.raises(ArgumentSpecError, match="is not a int"):
        spec_of(Option("count", "int", choices=(True,)))


def role(*options: Option) -> RoleSpec:
    return RoleSpec(role="memcached", short_description="", options=options, status=())


def pick(spec: RoleSpec, watch_vars: tuple[str, ...] = ()) -> list[str]:
    options = spec_options(
        spec, group="cache.example.com", kind="Memcached", watch_vars=watch_vars, snake_case=True, reserved=RESERVED
    )
    return [o.name for o in options]


def test_only_what_the_resources_author_sets_is_a_spec_field() -> None:
    spec = role(
        Option("size", "int"),
        Option("ansible_operator_meta", "dict"),
        Option("_cache_example_com_memcached", "dict"),
        Option("_cache_example_com_memcached_spec", "dict"),
        Option("memcached_image"),  # the role's own default
        Option("state"),  # set by the watch
    )
    assert pick(spec, watch_vars=("state",)) == ["size"]


@pytest.mark.parametrize("name", ["ansible_shell_executable", "_internal", "hostvars", "item", "lookup", "omit"])
def test_names_the_operator_would_refuse_in_a_spec_are_refused_here(name: str) -> None:
    with pytest.raises(ArgumentSpecError, match=f"option '{name}'"):
        pick(role(Option(name)))


def test_status_is_the_operators_keys_plus_the_roles() -> None:
    schema = status_schema((Option("phase", choices=("Up", "Down")),), where="w")
    assert list(schema["properties"]) == ["phase", *OPERATOR_STATUS]
    assert schema["properties"]["phase"]["enum"] == ["Up", "Down"]
    assert schema["x-kubernetes-preserve-unknown-fields"] is True
    assert "phase comes from the role" in schema["description"]
    assert "required" not in schema
    with pytest.raises(ArgumentSpecError, match="'conditions' is written by the operator"):
        status_schema((Option("conditions", "list"),), where="w")


def test_ansible_markup_is_made_plain() -> None:
    text = "spec.x. Use C(a) or O(b=c), I(d), L(docs,https://example.invalid) and R(here,ref)."
    assert describe(text, "spec.x") == "Use `a` or `b=c`, d, docs (https://example.invalid) and here (ref)."
    assert describe("spec.x.", "spec.x") == ""
    assert describe("spec.xy. Kept.", "spec.x") == "spec.xy. Kept."


@given(st.from_regex(r"[a-z][a-z0-9]{0,5}(_[a-z0-9]{1,6}){0,3}", fullmatch=True))
def test_a_spec_key_is_one_the_operator_snake_cases_back_to_the_option_or_refused(name: str) -> None:
    """operator-sdk's snake_case has quirks (``aA`` -> ``aa``): such an option is refused, never misnamed."""
    try:
        (key,) = spec_of(Option(name))["properties"]
    except ArgumentSpecError as exc:
        assert naming.to_snake(to_camel(name)) != name and "cannot be a spec key" in str(exc)
        return
    assert naming.to_snake(key) == name


@given(st.from_regex(r"[a-z]{2,6}(_[a-z]{2,6}){0,3}", fullmatch=True))
def test_names_of_words_round_trip(name: str) -> None:
    assert naming.to_snake(to_camel(name)) == name
