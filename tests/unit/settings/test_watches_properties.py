"""Property tests of the watches.yaml loader: whatever the file holds, a ConfigError or watches that pass every check.

Inputs: arbitrary bytes, arbitrary text, arbitrary YAML structures (entries of known and unknown fields with
values of any shape) and random byte edits of a valid file. Examples are kept few so the unit tests stay fast.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hybrid_operator.errors import ConfigError
from hybrid_operator.settings import names
from hybrid_operator.settings.durations import PERIOD_CEILING, PERIOD_FLOOR
from hybrid_operator.settings.watches import KNOWN_FIELDS, Watch, load_watches

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ROLES = FIXTURES / "roles"
VALID = (FIXTURES / "watches" / "valid-all-fields.yaml").read_bytes()
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One file, rewritten for each example (a function-scoped tmp_path would be shared by all examples)."""
    yield tmp_path_factory.mktemp("watches") / "watches.yaml"


def outcome(path: Path, data: bytes, env: dict[str, str] | None = None) -> list[Watch] | ConfigError:
    path.write_bytes(data)
    try:
        watches = load_watches(path, roles_paths=[ROLES], env=env or {})
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return exc
    assert_valid(watches)
    return watches


def assert_valid(watches: list[Watch]) -> None:
    """What every loaded watch satisfies, whatever the file said."""
    assert watches
    for watch in watches:
        assert names.group_problem(watch.gvk.group) is None
        assert names.version_problem(watch.gvk.version) is None
        assert names.kind_problem(watch.gvk.kind) is None
        period = watch.reconcile_period
        assert period is None or period == 0 or PERIOD_FLOOR <= period <= PERIOD_CEILING
        assert period is None or math.isfinite(period)
        assert (watch.target.role is None) != (watch.target.playbook is None)
        assert watch.max_runner_artifacts >= 1
        assert isinstance(watch.vars, dict)
        if watch.finalizer is not None:
            assert names.qualified_name_problem(watch.finalizer.name) is None
        for gvk in watch.blacklist:
            assert names.kind_problem(gvk.kind) is None


# -- strategies ----------------------------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.sampled_from(["v1", "Foo", "memcached", "1s", "0", "In", "Exists", "example.com/x", "apps", "b,c!=d"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10) | SCALARS, inner, max_size=4),
    max_leaves=20,
)
LABELS = st.one_of(SCALARS, st.sampled_from(["tier", "app.kubernetes.io/name", "a b", "", "x" * 64, "/x"]))
SELECTORS = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(LABELS, LABELS | VALUES, max_size=3) | VALUES,
        "matchExpressions": st.lists(
            st.fixed_dictionaries(
                {
                    "key": LABELS | VALUES,
                    "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]) | VALUES,
                },
                optional={"values": st.lists(LABELS, max_size=3) | VALUES, "x": VALUES},
            )
            | VALUES,
            max_size=3,
        ),
    },
)
FINALIZERS = st.fixed_dictionaries(
    {"name": LABELS | VALUES},
    optional={"role": VALUES | st.just("memcached"), "playbook": VALUES, "vars": VALUES, "x": VALUES},
)
GVKS = st.fixed_dictionaries(
    {"version": LABELS | VALUES, "kind": LABELS | VALUES}, optional={"group": LABELS | VALUES, "x": VALUES}
)
FIELDS = st.sampled_from([*sorted(KNOWN_FIELDS), "x"])
FIELD_VALUES = st.one_of(VALUES, SELECTORS, FINALIZERS, st.lists(GVKS | VALUES, max_size=3))
BASE = {"version": "v1alpha1", "group": "cache.example.com", "kind": "Memcached", "role": "memcached"}
ENTRIES = st.one_of(
    st.dictionaries(FIELDS, FIELD_VALUES, max_size=8),
    st.builds(lambda extra: {**BASE, **extra}, st.dictionaries(FIELDS, FIELD_VALUES, max_size=4)),
    VALUES,
)


def dump(document: Any) -> bytes:
    return yaml.safe_dump(document, allow_unicode=True).encode("utf-8", "surrogatepass")


# -- properties ----------------------------------------------------------------------------------------


@SETTINGS
@given(st.binary(max_size=400))
def test_arbitrary_bytes(path: Path, data: bytes) -> None:
    outcome(path, data)


@SETTINGS
@given(st.text(max_size=400))
def test_arbitrary_text(path: Path, text: str) -> None:
    outcome(path, text.encode("utf-8", "surrogatepass"))


@SETTINGS
@given(st.lists(ENTRIES, max_size=3) | VALUES)
def test_arbitrary_yaml_structures(path: Path, document: Any) -> None:
    outcome(path, dump(document))


@SETTINGS
@given(st.builds(lambda extra: [{**BASE, **extra}], st.dictionaries(FIELDS, FIELD_VALUES, max_size=3)))
def test_a_valid_entry_with_arbitrary_extra_fields(path: Path, document: Any) -> None:
    outcome(path, dump(document))


CHUNKS = st.binary(max_size=8) | st.text(" \n\t:-[]{}&*!|>'\"#%@`,.?0123456789abcxyz", max_size=8).map(str.encode)


@SETTINGS
@given(SELECTORS)
def test_a_valid_entry_with_an_arbitrary_selector(path: Path, selector: dict[str, Any]) -> None:
    outcome(path, dump([{**BASE, "selector": selector}]))


@SETTINGS
@given(FINALIZERS, st.lists(GVKS | VALUES, max_size=3))
@example({"name": "0", "playbook": "0\n"}, [])  # a name ending in a newline: the error stays one line
def test_a_valid_entry_with_arbitrary_finalizer_and_blacklist(path: Path, finalizer: Any, blacklist: Any) -> None:
    outcome(path, dump([{**BASE, "finalizer": finalizer, "blacklist": blacklist}]))


EDITS = st.lists(
    st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.integers(0, len(VALID)), CHUNKS),
    min_size=1,
    max_size=6,
)


@SETTINGS
@given(EDITS)
def test_random_edits_of_a_valid_file(path: Path, edits: list[tuple[str, int, bytes]]) -> None:
    data = bytearray(VALID)
    for op, at, chunk in edits:
        at = min(at, len(data))
        if op == "insert":
            data[at:at] = chunk
        elif op == "delete":
            del data[at : at + max(1, len(chunk))]
        else:
            data[at : at + len(chunk)] = chunk
    outcome(path, bytes(data))


@SETTINGS
@given(st.text(max_size=60))
def test_arbitrary_environment_values(path: Path, value: str) -> None:
    text = b"- version: ${V}\n  group: cache.example.com\n  kind: Memcached\n  role: memcached\n  vars: {a: ${V}}\n"
    outcome(path, text, env={"V": value})


def test_the_valid_file_itself_loads(path: Path) -> None:
    result = outcome(path, VALID)
    assert isinstance(result, list)
    assert len(result) == 1
