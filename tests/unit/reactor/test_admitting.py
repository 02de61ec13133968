"""Admission: a custom resource's spec names, depth and annotations are checked before anything runs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.ansible.extravars import KNOWN_RESERVED_KEYS
from hybrid_operator.ansible.naming import refused_spec_names, snake_keys, to_snake
from hybrid_operator.ansible.reserved import Reservations, reserved_names
from hybrid_operator.errors import InvalidObject, TemporaryError
from hybrid_operator.kube.objects import bounded, count_entries
from hybrid_operator.reactor.admitting import MAX_DEPTH, REASON_ANSIBLE, admit, nesting_depth
from hybrid_operator.reactor.annotations import VERBOSITY, RunSettings

DEFAULTS = RunSettings(36000.0, 2, 20)
RESERVED = frozenset({"omit", "hostvars", "lookup", "name", "port"})
RESERVATIONS = Reservations(RESERVED, KNOWN_RESERVED_KEYS, None)


def admit_object(obj: dict[str, Any], reservations: Reservations = RESERVATIONS) -> RunSettings:
    return admit(
        obj,
        group="cache.example.com",
        kind="Memcached",
        snake_case=True,
        ansible=lambda: reservations,
        defaults=DEFAULTS,
    )


def check(spec: Any, *, snake: bool = True, meta: dict[str, Any] | None = None) -> RunSettings:
    obj = {"metadata": meta or {"name": "x"}, "spec": spec}
    return admit(
        obj,
        group="cache.example.com",
        kind="Memcached",
        snake_case=snake,
        ansible=lambda: RESERVATIONS,
        defaults=DEFAULTS,
    )


@pytest.mark.parametrize(
    "key",
    [
        "ansibleShellExecutable",  # -> _ansible_shell_executable
        "ansible_remote_tmp",
        "ansibleConnection",
        "ANSIBLE_BECOME",
        "ansible_operator_meta",
        "_cache_example_com_memcached",
        "_cache_example_com_memcached_spec",
        "_fooNamespace",
        "omit",
        "hostvars",
        "lookup",
        "with.dot",
        "1starts_with_digit",
        "",
        "nul\x00key",
        "ünicode",
        "class",
    ],
)
def test_spec_keys_that_would_steer_ansible_are_refused_as_written(key: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        check({"size": 3, key: "touch /tmp/x"})
    assert caught.value.reason == "InvalidSpec"
    assert repr(key) in caught.value.message
    assert "'size'" not in caught.value.message


def test_without_snake_case_the_key_is_checked_as_written() -> None:
    assert refused_spec_names({"ansibleConnection": 1}, group="g", kind="K", snake_case=False, reserved=RESERVED) == []
    assert refused_spec_names({"ansible_connection": 1}, group="g", kind="K", snake_case=False, reserved=RESERVED) == [
        "ansible_connection"
    ]


def test_ordinary_specs_pass() -> None:
    assert check({"size": 3, "deploymentName": "web", "replicas": 2, "nested": {"ansible_x": "data"}}) == DEFAULTS


def test_a_spec_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidObject, match="spec must be an object"):
        check(["a"])


def test_many_long_keys_make_a_bounded_message() -> None:
    spec = {f"_{'k' * 1000}{i}": i for i in range(500)}
    with pytest.raises(InvalidObject) as caught:
        check(spec)
    assert len(caught.value.message) < 1500
    assert "and 490 more" in caught.value.message


def test_annotations_are_checked_too() -> None:
    with pytest.raises(InvalidObject) as caught:
        check({}, meta={"name": "x", "annotations": {VERBOSITY: "1000000"}})
    assert caught.value.reason == "InvalidAnnotation"


def _nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        node = {"a": node}
    return node


@pytest.mark.parametrize("depth", [5_000, 50_000])
def test_deep_objects_are_refused_without_recursing(depth: int) -> None:
    with pytest.raises(InvalidObject, match=f"more than {MAX_DEPTH} levels"):
        check(_nested(depth))


def test_depth_just_under_the_limit_passes() -> None:
    assert check(_nested(MAX_DEPTH - 2)) == DEFAULTS  # the object adds one level, spec another


def test_nesting_depth_counts_lists_and_maps() -> None:
    assert nesting_depth(1, 10) == 0
    assert nesting_depth({}, 10) == 1
    assert nesting_depth({"a": [{"b": []}]}, 10) == 4
    assert nesting_depth(_nested(1000), 10) == 11  # stops counting past the limit


def test_ansible_core_reserves_what_steers_it() -> None:
    names = reserved_names()
    for name in ("omit", "hostvars", "lookup", "query", "inventory_hostname", "playbook_dir", "groups", "namespace"):
        assert name in names
    assert "ansible_shell_executable" in names and "ansible_ssh_common_args" in names
    # Play and task keywords only make Ansible warn; real specs use them (our VirtualMachine's `action`).
    for name in ("size", "replicas", "name", "port", "timeout", "action"):
        assert name not in names


keys = st.text(max_size=30) | st.sampled_from(["ansibleHost", "AnsibleX", "_x", "omit", "HTTPServer", "sizeK8s"])


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(keys, st.integers(), max_size=8), st.booleans())
def test_every_name_that_passes_is_a_plain_variable(spec: dict[str, int], snake: bool) -> None:
    refused = refused_spec_names(spec, group="g.io", kind="K", snake_case=snake, reserved=RESERVED)
    assert set(refused) <= set(spec)
    for key in spec:
        if key in refused:
            continue
        name = to_snake(key) if snake else key
        assert name.isascii() and name.isidentifier()
        assert not name.startswith("_") and not name.lower().startswith("ansible_")
        assert name not in RESERVED


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_snake_case_never_raises(key: str) -> None:
    assert isinstance(to_snake(key), str)


# Keys Ansible's JSON decoders read as instructions: refused wherever they are, naming the path.
HOSTILE_PLACES = [
    ({"spec": {"extra": {"__ansible_unsafe": 1}}}, "InvalidSpec", "spec.extra.__ansible_unsafe"),
    ({"spec": {"items": [{"a": 1}, {"__ansible_vault": "x"}]}}, "InvalidSpec", "spec.items[1].__ansible_vault"),
    ({"spec": {"podLabels": {"__ansible_type": "1"}}}, "InvalidSpec", "spec.podLabels.__ansible_type"),
    ({"spec": {"a": [[{"b": {"__ansible_future": 1}}]]}}, "InvalidSpec", "spec.a[0][0].b.__ansible_future"),
    ({"status": {"__ansible_unsafe": 1}}, "InvalidObject", "status.__ansible_unsafe"),
    (
        {"metadata": {"name": "x", "labels": {"__ansible_unsafe": "1"}}},
        "InvalidObject",
        "metadata.labels.__ansible_unsafe",
    ),
    ({"__ansible_unsafe": 1}, "InvalidObject", "__ansible_unsafe"),
]


@pytest.mark.parametrize(("obj", "reason", "path"), HOSTILE_PLACES)
def test_reserved_keys_are_refused_at_any_depth_naming_the_path(obj: dict[str, Any], reason: str, path: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        admit_object({"metadata": {"name": "x"}, **obj})
    assert caught.value.reason == reason
    assert path in caught.value.message


def test_keys_like_reserved_ones_but_not_reserved_run() -> None:
    spec = {"unsafe": 1, "x": {"_ansible_unsafe": 1, "f:__ansible_unsafe": {}, "a__ansible_vault": 2}}
    assert admit_object({"metadata": {"name": "x"}, "spec": spec}) == DEFAULTS


def test_a_key_the_installed_ansible_reserves_is_refused_whatever_its_name() -> None:
    mine = Reservations(RESERVED, frozenset({"$secret_key"}), None)
    with pytest.raises(InvalidObject, match=r"spec\.a\.\$secret_key"):
        admit_object({"metadata": {"name": "x"}, "spec": {"a": {"$secret_key": 1}}}, mine)


def test_many_reserved_keys_are_listed_bounded() -> None:
    spec = {f"k{i}": {"__ansible_unsafe": i} for i in range(500)}
    with pytest.raises(InvalidObject) as caught:
        admit_object({"metadata": {"name": "x"}, "spec": spec})
    assert caught.value.message.count("__ansible_unsafe") == 10
    assert "and more" in caught.value.message


def test_no_object_runs_when_ansible_failed_the_extra_vars_check() -> None:
    broken = Reservations(RESERVED, KNOWN_RESERVED_KEYS, "a resource's strings were rendered")
    with pytest.raises(InvalidObject) as caught:
        admit_object({"metadata": {"name": "x"}, "spec": {}}, broken)
    assert caught.value.reason == REASON_ANSIBLE
    assert "strings were rendered" in caught.value.message


def test_a_check_that_could_not_run_is_retried_not_final() -> None:
    pending = Reservations(RESERVED, KNOWN_RESERVED_KEYS, "the check could not run: timeout", final=False)
    with pytest.raises(TemporaryError):
        admit_object({"metadata": {"name": "x"}, "spec": {}}, pending)


_json_keys = st.one_of(st.text(max_size=12), st.sampled_from([*sorted(KNOWN_RESERVED_KEYS), "__ansible_x"]))
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_json_keys, inner, max_size=4),
    max_leaves=30,
)


def _has_reserved_key(value: Any) -> bool:
    if isinstance(value, dict):
        return any(k.startswith("__ansible_") or _has_reserved_key(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_reserved_key(v) for v in value)
    return False


@settings(max_examples=300, deadline=None)
@given(spec=st.dictionaries(st.sampled_from(["size", "image", "labels", "items"]), _json, max_size=4), status=_json)
def test_an_object_runs_exactly_when_no_key_anywhere_is_reserved(spec: dict[str, Any], status: Any) -> None:
    obj = {"metadata": {"name": "x"}, "spec": spec, "status": status}
    if _has_reserved_key(obj):
        with pytest.raises(InvalidObject, match="__ansible_"):
            admit_object(obj)
    else:
        assert admit_object(obj) == DEFAULTS


@pytest.mark.parametrize(
    "key",
    ["ansibleInventory", "ansible_inventory", "ANSIBLE_INVENTORY", "ansibleInventorySources", "inventory_dir"],
)
def test_a_resource_can_never_name_an_inventory(key: str) -> None:
    """Only the operator's own environment (ANSIBLE_INVENTORY) chooses the hosts a run reaches: the names
    that would steer inventory or host selection are refused with the installed ansible-core's list."""
    real = Reservations(reserved_names(), KNOWN_RESERVED_KEYS, None)
    with pytest.raises(InvalidObject) as caught:
        admit_object({"metadata": {"name": "x"}, "spec": {key: "/tmp/evil-inventory"}}, real)
    assert caught.value.reason == "InvalidSpec"
    assert repr(key) in caught.value.message


# -- size: entries, not only depth -------------------------------------------------------------------------


def test_an_object_over_the_entry_bound_is_refused_naming_the_count_and_the_bound() -> None:
    spec = {"items": [{"a": 1}] * 140}
    with pytest.raises(InvalidObject) as refused:
        admit(
            {"metadata": {"name": "x"}, "spec": spec},
            group="cache.example.com",
            kind="Memcached",
            snake_case=True,
            ansible=lambda: RESERVATIONS,
            defaults=DEFAULTS,
            max_entries=100,
        )
    assert refused.value.reason == "InvalidSpec"
    assert "holds 284 entries" in refused.value.message and "281 in its spec" in refused.value.message
    assert "more than the 100" in refused.value.message and "--max-object-entries" in refused.value.message


def test_the_stub_the_informer_kept_is_refused_as_the_object_was() -> None:
    big = {"apiVersion": "v1", "kind": "X", "metadata": {"name": "x", "managedFields": [{}] * 50}}
    big["spec"] = {"items": list(range(5_000))}
    stub = bounded(big, 1_000)
    assert "spec" not in stub and "managedFields" not in stub["metadata"]
    with pytest.raises(InvalidObject, match=r"holds 5057 entries .*5001 in its spec.*more than the 1000"):
        admit(stub, group="g", kind="X", snake_case=True, ansible=lambda: RESERVATIONS, defaults=DEFAULTS)


def test_a_large_status_is_an_invalid_object_not_an_invalid_spec() -> None:
    obj = {"metadata": {"name": "x"}, "spec": {"size": 1}, "status": {"log": list(range(200))}}
    with pytest.raises(InvalidObject) as refused:
        admit(
            obj, group="g", kind="X", snake_case=True, ansible=lambda: RESERVATIONS, defaults=DEFAULTS, max_entries=100
        )
    assert refused.value.reason == "InvalidObject" and "the whole object" in refused.value.message


def test_real_objects_fit_the_default_bound_by_far() -> None:
    sample = {"spec": {f"option{i}": {"nested": [1, 2, {"k": "v"}]} for i in range(500)}}
    assert check(sample["spec"]) == DEFAULTS  # 3,001 entries: a CR with 500 options set


# -- no twins -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        ({"logLevel": "info", "log_level": "$(curl evil)"}, "spec: 'logLevel' and 'log_level'"),
        ({"maxItems": 10, "max_items": 100_000}, "spec: 'maxItems' and 'max_items'"),
        ({"logLevel": "info", "logLevel ": "x"}, "spec: 'logLevel' and 'logLevel '"),
        ({"a": {"b": [{"userName": 1, "user-name": 2}]}}, "spec.a.b[0]: 'userName' and 'user-name'"),
        ({"egressIPs": 1, "egress_ips": 2}, "spec: 'egressIPs' and 'egress_ips'"),
    ],
)
def test_keys_that_snake_case_to_the_same_name_are_refused_naming_both(spec: dict[str, Any], shown: str) -> None:
    with pytest.raises(InvalidObject) as refused:
        check(spec)
    assert refused.value.reason == "InvalidSpec"
    assert shown in refused.value.message


def test_twins_are_no_matter_without_snake_case() -> None:
    assert check({"logLevel": "info", "log_level": "x"}, snake=False) == DEFAULTS


_KEYS = st.text(alphabet="aAbB_- 1", min_size=1, max_size=6)
_SPECS = st.recursive(
    st.dictionaries(_KEYS, st.integers(0, 3), max_size=4),
    lambda inner: st.dictionaries(_KEYS, inner | st.lists(inner, max_size=3), max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_SPECS)
def test_an_admitted_spec_loses_no_key_to_snake_case(spec: dict[str, Any]) -> None:
    """Whatever the spec: either it is refused, or snake_casing it keeps every key (no value overrides
    another), which is what the role would otherwise silently receive."""
    try:
        check(spec)
    except InvalidObject:
        return
    assert count_entries(snake_keys(spec), 1 << 30) == count_entries(spec, 1 << 30)
