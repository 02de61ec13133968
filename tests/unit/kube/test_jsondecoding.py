"""The API server's JSON decodes at any depth, and the deep-object decoder agrees with the standard one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.kube.jsondecoding import _loads_iteratively, loads

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


def _nest(depth: int, leaf: str = "1") -> str:
    return '{"spec":' + '{"a":[' * depth + leaf + "]}" * depth + "}"


@settings(max_examples=300, deadline=None)
@given(json_values, st.booleans())
def test_same_value_as_the_standard_decoder(value: Any, indent: bool) -> None:
    text = json.dumps(value, indent=2 if indent else None, ensure_ascii=False)
    assert _loads_iteratively(text) == json.loads(text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from('{}[]:,"0123456789-.eEtrufalsn \\u\n') | st.characters(), max_size=40))
def test_any_text_decodes_like_the_standard_decoder_or_is_a_value_error(text: str) -> None:
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            _loads_iteratively(text)
        return
    if "NaN" in text or "Infinity" in text:  # Python's extension, never sent by the API server
        return
    assert _loads_iteratively(text) == expected


def test_the_standard_decoder_gives_up_on_depth() -> None:
    with pytest.raises(RecursionError):  # where this limit lies depends on the Python (3.11: ~1,000)
        json.loads(_nest(50_000))


@pytest.mark.parametrize("depth", [1_000, 5_000, 20_000, 50_000])
def test_objects_of_any_depth_decode(depth: int) -> None:
    text = _nest(depth)
    obj = loads(text.encode())
    node, levels = obj["spec"], 0
    while isinstance(node, dict):
        node, levels = node["a"][0], levels + 1
    assert (levels, node) == (depth, 1)


def test_ordinary_bodies_take_the_standard_decoder() -> None:
    assert loads(b'{"items": [{"metadata": {"name": "a\\u0000b \xf0\x9f\x98\x80"}}]}') == {
        "items": [{"metadata": {"name": "a\x00b \U0001f600"}}]
    }


@pytest.mark.parametrize("text", ["[1,]", '{"a" 1}', "[1 2]", "{", "[", "tru", "[1]x", "", '{"a":1,}', "[" * 60_000])
def test_malformed_text_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        loads(text)
