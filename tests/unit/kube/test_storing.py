"""The informers' compact store: no managedFields, JSON bytes decoded at every lookup, a deep object kept
as it is."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hybrid_operator.kube import storing

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


def deep(levels: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    node = top
    for _ in range(levels):
        node["a"] = {}
        node = node["a"]
    return top


def test_managed_fields_are_dropped_and_nothing_else() -> None:
    obj = {"metadata": {"name": "a", "managedFields": [{"manager": "kubectl"}]}, "spec": {"managedFields": 1}}
    assert storing.strip(obj) == {"metadata": {"name": "a"}, "spec": {"managedFields": 1}}
    assert storing.strip({"metadata": "odd"}) == {"metadata": "odd"}


@given(JSON)
def test_what_is_stored_decodes_to_what_was_put(value: Any) -> None:
    store = storing.Store()
    store.put(("ns", "a"), {"v": value})
    stored = store.raw(("ns", "a"))
    assert stored is not None and storing.decode(stored) == {"v": value}
    assert json.loads(storing.as_json(stored)) == {"v": value}


def test_a_lone_surrogate_survives_the_store() -> None:
    obj = json.loads('{"s": "\\ud800x"}')
    assert storing.decode(storing.encode(obj)) == obj


def test_each_lookup_is_a_copy_of_its_own() -> None:
    store = storing.Store()
    store.put(("ns", "a"), {"spec": {"n": 1}})
    first = storing.decode(store.raw(("ns", "a")) or {})
    first["spec"]["n"] = 2
    assert storing.decode(store.raw(("ns", "a")) or {}) == {"spec": {"n": 1}}


def test_an_object_too_deep_to_encode_is_kept_as_it_is() -> None:
    obj = deep(20_000)
    stored = storing.encode(obj)
    assert stored is obj
    assert storing.decode(stored) is obj
    assert storing.as_json(stored) is None  # the run proxy forwards such a read


def test_the_bytes_are_compact() -> None:
    obj = {"metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"list": [1, 2]}}
    assert storing.encode(obj) == b'{"metadata":{"name":"a","labels":{"x":"y"}},"spec":{"list":[1,2]}}'
