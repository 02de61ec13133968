"""Role metrics: operator-sdk's UserMetric JSON parsed with bounds, applied, and written as /metrics text."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.serving import usermetrics as um
from hybrid_operator.serving.usermetrics import Operation, UserMetric, UserMetricError, UserMetrics, parse
from tests.helpers import missing_upstream_metrics


def body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def galaxy(name: str, kind: str, **ops: Any) -> bytes:
    """The body Galaxy's osdk_metric sends: every suboption of the type present, null when unset."""
    options = {
        "counter": ("increment", "add"),
        "gauge": ("set", "increment", "decrement", "add", "subtract", "set_to_current_time"),
        "histogram": ("observe",),
        "summary": ("observe",),
    }[kind]
    return body({"name": name, "description": f"{name} help", kind: {key: ops.get(key) for key in options}})


def store(*requests: bytes, reserved: set[str] | None = None, limit: int = um.MAX_METRICS) -> UserMetrics:
    metrics = UserMetrics(limit=limit, reserved=lambda: set(reserved or ()))
    for request in requests:
        metrics.apply(parse(request))
    return metrics


def samples(metrics: UserMetrics) -> dict[str, float]:
    out = {}
    for line in metrics.render().decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


# -- parse: what each request means ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "ops", "expected"),
    [
        ("counter", {}, None),
        ("counter", {"increment": True}, Operation("inc")),
        ("counter", {"add": 2}, Operation("add", 2.0)),
        ("counter", {"increment": True, "add": 5}, Operation("inc")),  # upstream's order
        ("counter", {"add": 0}, None),
        ("gauge", {}, None),
        ("gauge", {"set": 5}, Operation("set", 5.0)),
        ("gauge", {"set": 0}, Operation("set", 0.0)),  # upstream ignores 0; we set it
        ("gauge", {"increment": True}, Operation("inc")),
        ("gauge", {"decrement": True}, Operation("dec")),
        ("gauge", {"add": 7}, Operation("add", 7.0)),
        ("gauge", {"subtract": 7}, Operation("sub", 7.0)),
        ("gauge", {"set_to_current_time": True}, Operation("set_to_current_time")),
        ("gauge", {"add": 1, "set": 9}, Operation("add", 1.0)),
        ("histogram", {"observe": 2}, Operation("observe", 2.0)),
        ("histogram", {}, Operation("observe", 0.0)),  # upstream observes 0 on a bare create
        ("summary", {"observe": -1.5}, Operation("observe", -1.5)),
        ("summary", {}, Operation("observe", 0.0)),
    ],
)
def test_galaxy_requests_parse_to_one_operation(kind: str, ops: dict[str, Any], expected: Operation | None) -> None:
    assert parse(galaxy("m", kind, **ops)) == UserMetric("m", "m help", kind, expected)  # type: ignore[arg-type]


def test_unknown_keys_are_ignored_and_a_missing_description_is_empty_help() -> None:
    metric = parse(body({"name": "m", "gauge": {"set": 1, "extra": "x"}, "labels": {"a": "b"}}))
    assert metric == UserMetric("m", "", "gauge", Operation("set", 1.0))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{", "not JSON"),
        (b"\xff\xfe\x00", "not JSON"),
        (b"[]", "must be a JSON object"),
        (b'"name"', "must be a JSON object"),
        (body({"description": "x", "counter": {}}), "name: required"),
        (body({"name": "", "counter": {}}), "name: required"),
        (body({"name": 7, "counter": {}}), "name: required"),
        (body({"name": "bad name", "counter": {}}), "not a Prometheus metric name"),
        (body({"name": "9lives", "counter": {}}), "not a Prometheus metric name"),
        (body({"name": "caf\u00e9", "counter": {}}), "not a Prometheus metric name"),
        (body({"name": "a" * 201, "counter": {}}), "at most 200"),
        (body({"name": "m", "description": 5, "counter": {}}), "description: must be a string"),
        (body({"name": "m", "description": "h" * 1025, "counter": {}}), "at most 1024"),
        (body({"name": "m"}), "at least one metric"),
        (body({"name": "m", "counter": None}), "at least one metric"),
        (body({"name": "m", "meter": {}}), "at least one metric"),
        (body({"name": "m", "counter": {}, "gauge": {}}), "only one metric"),
        (body({"name": "m", "counter": 1}), "counter: must be an object"),
        (body({"name": "m", "counter": {"add": -1}}), "cannot decrease"),
        (body({"name": "m", "counter": {"add": "2"}}), "counter.add: must be a number"),
        (body({"name": "m", "counter": {"add": True}}), "counter.add: must be a number"),
        (body({"name": "m", "gauge": {"increment": "yes"}}), "gauge.increment: must be true or false"),
        (body({"name": "m", "gauge": {"set": 10**400}}), "gauge.set: must be a finite number"),
        (b'{"name": "m", "gauge": {"set": 1e999}}', "gauge.set: must be a finite number"),
        (b'{"name": "m", "gauge": {"set": NaN}}', "not JSON"),
        (b'{"name": "m", "histogram": {"observe": -Infinity}}', "not JSON"),
        (b"[" * 30_000 + b"]" * 30_000, "nested too deeply"),
    ],
)
def test_malformed_requests_are_refused_with_a_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(UserMetricError, match=re.escape(reason)) as caught:
        parse(raw)
    assert caught.value.status == 400


def test_a_huge_body_is_refused_before_it_is_parsed() -> None:
    huge = body({"name": "m", "description": "h" * um.MAX_BODY_BYTES, "counter": {}})
    with pytest.raises(UserMetricError, match="at most 65536") as caught:
        parse(huge)
    assert caught.value.status == 413


# -- the store: create, update, refuse ------------------------------------------------------------------


def test_upstream_molecule_sequence_gives_upstream_values() -> None:
    """The memcached-molecule-operator role's calls, and the values its molecule test asserts."""
    metrics = store(
        galaxy("sanity_counter", "counter"),
        galaxy("sanity_gauge", "gauge"),
        galaxy("sanity_histogram", "histogram"),
        galaxy("sanity_summary", "summary"),
        galaxy("counter_inc_test", "counter"),
        galaxy("counter_inc_test", "counter", increment=True),
        galaxy("counter_add_test", "counter"),
        galaxy("counter_add_test", "counter", add=2.0),
        galaxy("gauge_set_test", "gauge", set=5.0),
        galaxy("gauge_add_test", "gauge"),
        galaxy("gauge_add_test", "gauge", add=7.0),
        galaxy("gauge_sub_test", "gauge"),
        galaxy("gauge_sub_test", "gauge", subtract=7.0),
        galaxy("gauge_time_test", "gauge", set_to_current_time=True),
        galaxy("summary_test", "summary"),
        galaxy("summary_test", "summary", observe=2.0),
        galaxy("histogram_test", "histogram"),
        galaxy("histogram_test", "histogram", observe=2.0),
    )
    text = metrics.render().decode()
    assert not missing_upstream_metrics(text), text
    values = samples(metrics)
    assert values["histogram_test_count"] == 2  # the bare create observed 0, as upstream
    assert values['histogram_test_bucket{le="0.005"}'] == 1
    assert values['histogram_test_bucket{le="1.0"}'] == 1
    assert values['histogram_test_bucket{le="2.5"}'] == 2
    assert values['histogram_test_bucket{le="+Inf"}'] == 2
    assert abs(values["gauge_time_test"] - time.time()) < 60


def test_gauge_operations_accumulate() -> None:
    metrics = store(
        galaxy("g", "gauge", set=10.0),
        galaxy("g", "gauge", increment=True),
        galaxy("g", "gauge", decrement=True),
        galaxy("g", "gauge", decrement=True),
        galaxy("g", "gauge", add=0.5),
        galaxy("g", "gauge", subtract=2.0),
    )
    assert samples(metrics)["g"] == 7.5


def test_exposition_has_help_type_and_exact_names() -> None:
    metrics = store(body({"name": "jobs:done", "description": 'a "b"\\c\nd', "counter": {"increment": True}}))
    assert metrics.render().decode() == (
        '# HELP jobs:done a "b"\\\\c\\nd\n# TYPE jobs:done counter\njobs:done 1.0\n'  # no _total, no _created
    )


def test_first_type_and_help_stay() -> None:
    metrics = store(galaxy("m", "counter"), body({"name": "m", "description": "other", "counter": {"add": 1}}))
    assert "# HELP m m help\n" in metrics.render().decode()
    for kind in ("gauge", "histogram", "summary"):
        with pytest.raises(UserMetricError, match="cannot change metric type of m, which is a counter"):
            metrics.apply(parse(galaxy("m", kind)))
    assert samples(metrics) == {"m": 1.0}


def test_histogram_and_summary_are_different_types() -> None:
    metrics = store(galaxy("h", "histogram", observe=1.0))
    with pytest.raises(UserMetricError, match="which is a histogram"):
        metrics.apply(parse(galaxy("h", "summary", observe=1.0)))


def test_at_most_limit_metrics_and_updates_still_work_at_the_limit() -> None:
    metrics = store(*(galaxy(f"m{i}", "gauge") for i in range(3)), limit=3)
    with pytest.raises(UserMetricError, match="too many metrics: at most 3"):
        metrics.apply(parse(galaxy("m3", "gauge")))
    metrics.apply(parse(galaxy("m0", "gauge", set=4.0)))
    assert len(metrics) == 3 and samples(metrics)["m0"] == 4


@pytest.mark.parametrize("name", ["hybrid_operator_leader", "ansible_operator_x", "controller_runtime_reconcile_total"])
def test_the_operators_prefixes_are_refused(name: str) -> None:
    with pytest.raises(UserMetricError, match="prefix the operator's own metrics use"):
        store(galaxy(name, "gauge"))


def test_names_the_operator_exports_are_refused() -> None:
    with pytest.raises(UserMetricError, match="collides with the operator's metric process_seconds_sum"):
        store(galaxy("process_seconds", "summary"), reserved={"process_seconds_sum"})


def test_the_default_reserved_names_come_from_the_operators_registry() -> None:
    names = um.own_names()
    assert {"ansible_operator_reconciles_bucket", "ansible_operator_reconcile_result_total"} <= names
    assert "ansible_operator_build_info" in names


def test_user_metrics_may_not_collide_with_each_others_samples() -> None:
    metrics = store(galaxy("latency", "histogram"))
    for name in ("latency_sum", "latency_bucket", "latency_count"):
        with pytest.raises(UserMetricError, match=r"collides with latency_\w+ of metric latency"):
            metrics.apply(parse(galaxy(name, "counter")))
    metrics = store(galaxy("x_sum", "gauge"))
    with pytest.raises(UserMetricError, match="collides with x_sum of metric x_sum"):
        metrics.apply(parse(galaxy("x", "summary")))


def test_a_refused_request_changes_nothing() -> None:
    metrics = store(galaxy("g", "gauge", set=1.0))
    before = metrics.render()
    for raw in (galaxy("g", "counter"), body({"name": "g", "gauge": {"set": "x"}})):
        with pytest.raises(UserMetricError):
            metrics.apply(parse(raw))
    assert metrics.render() == before


# -- hostile input: anything at all is a UserMetric or a UserMetricError ----------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
fields = st.sampled_from(["name", "description", "counter", "gauge", "histogram", "summary"])
options = st.sampled_from(["increment", "decrement", "add", "subtract", "set", "set_to_current_time", "observe"])
near_misses = st.fixed_dictionaries(
    {"name": st.sampled_from(["m", "n:1", "", "bad name", None, 3])},
    optional={
        "description": json_values,
        "counter": st.none() | st.dictionaries(options, json_values, max_size=3) | json_values,
        "gauge": st.none() | st.dictionaries(options, json_values, max_size=3),
        "histogram": st.dictionaries(options, json_values, max_size=2),
        "summary": st.dictionaries(options, json_values, max_size=2),
    },
)


def _survives(metrics: UserMetrics, raw: bytes) -> None:
    try:
        metrics.apply(parse(raw))
    except UserMetricError as exc:
        assert 400 <= exc.status < 500 and str(exc)
    metrics.render()


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise_anything_else(raw: bytes) -> None:
    _survives(UserMetrics(limit=5, reserved=set), raw)


@settings(max_examples=400, deadline=None)
@given(json_values | st.dictionaries(fields, json_values, max_size=6))
def test_arbitrary_json_never_raises_anything_else(doc: Any) -> None:
    _survives(UserMetrics(limit=5, reserved=set), body(doc))


@settings(max_examples=200, deadline=None)
@given(st.lists(near_misses, min_size=1, max_size=6))
def test_sequences_of_near_valid_requests_never_raise_anything_else(docs: list[dict[str, Any]]) -> None:
    metrics = UserMetrics(limit=3, reserved=set)
    for doc in docs:
        _survives(metrics, body(doc))
    assert len(metrics) <= 3
