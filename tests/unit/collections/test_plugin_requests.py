"""The hybrid_operator.util collection's shared helpers: condition rules, merging, and who the run is for."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hybrid_operator.ansible.naming import object_var_name

PLUGIN_UTILS = (
    Path(__file__).resolve().parents[3]
    / "hybrid_operator/collections/ansible_collections/hybrid_operator/util/plugins/plugin_utils/requests.py"
)


def _load() -> ModuleType:
    """Load the file on its own: it needs only the standard library, not Ansible's collection loader."""
    spec = importlib.util.spec_from_file_location("_hybrid_operator_util_requests", PLUGIN_UTILS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and friends look modules up by name
    spec.loader.exec_module(module)
    return module


requests = _load()
OLD = "2020-01-01T00:00:00Z"
OWNER = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "web", "namespace": "shop"}


# -- validate_conditions -------------------------------------------------------------------------------


@pytest.mark.parametrize("empty", [None, ""])
def test_no_conditions(empty: Any) -> None:
    assert requests.validate_conditions(empty) == ([], None)


def test_valid_conditions_are_normalised() -> None:
    conditions, problem = requests.validate_conditions(
        [
            {"type": "Ready", "status": True, "reason": "AllReplicasUp", "message": "3/3"},
            {"type": "Degraded", "status": False},
            {"type": "Synced"},
            {"type": "Progressing", "status": "Unknown", "reason": "Scaling_Up:phase,2"},
        ]
    )
    assert problem is None
    assert [(c["type"], c["status"]) for c in conditions] == [
        ("Ready", "True"),
        ("Degraded", "False"),
        ("Synced", "Unknown"),
        ("Progressing", "Unknown"),
    ]
    assert conditions[0]["reason"] == "AllReplicasUp"


@pytest.mark.parametrize(
    ("conditions", "problem"),
    [
        ({"type": "Ready"}, "conditions must be a list"),
        ([{"status": "True"}], "conditions[0] needs a 'type'"),
        ([{"type": "Ready"}, "Ready"], "conditions[1] needs a 'type'"),
        ([{"type": "Ready", "status": "yes"}], "conditions[0].status must be True, False or Unknown"),
        ([{"type": "Ready", "reason": "All up"}], "conditions[0].reason must be CamelCase"),
        ([{"type": "Ready", "reason": "1stTry"}], "conditions[0].reason must be CamelCase"),
        ([{"type": "Ready", "reason": "Trailing,"}], "conditions[0].reason must be CamelCase"),
    ],
)
def test_invalid_conditions(conditions: Any, problem: str) -> None:
    valid, message = requests.validate_conditions(conditions)
    assert valid == []
    assert message is not None and message.startswith(problem)


def test_validate_does_not_modify_its_input() -> None:
    raw = [{"type": "Ready", "status": True}]
    requests.validate_conditions(raw)
    assert raw == [{"type": "Ready", "status": True}]


# -- merge_conditions ----------------------------------------------------------------------------------


def test_merge_keeps_transition_time_while_status_unchanged() -> None:
    current = [{"type": "Ready", "status": "True", "reason": "Up", "lastTransitionTime": OLD}]
    [merged] = requests.merge_conditions(current, [{"type": "Ready", "status": "True", "reason": "StillUp"}])
    assert merged == {"type": "Ready", "status": "True", "reason": "StillUp", "lastTransitionTime": OLD}


def test_merge_moves_transition_time_when_status_flips() -> None:
    current = [{"type": "Ready", "status": "True", "lastTransitionTime": OLD}]
    [merged] = requests.merge_conditions(current, [{"type": "Ready", "status": "False"}])
    assert merged["status"] == "False"
    assert merged["lastTransitionTime"] != OLD
    assert merged["lastTransitionTime"].endswith("Z")


def test_merge_replaces_by_type_and_keeps_the_rest() -> None:
    current = [
        {"type": "Ready", "status": "True", "lastTransitionTime": OLD},
        {"type": "Degraded", "status": "False", "lastTransitionTime": OLD},
    ]
    merged = requests.merge_conditions(current, [{"type": "Synced", "status": "True", "lastTransitionTime": OLD}])
    assert [c["type"] for c in merged] == ["Ready", "Degraded", "Synced"]
    assert current[0] == {"type": "Ready", "status": "True", "lastTransitionTime": OLD}  # not modified


# -- status_differs ------------------------------------------------------------------------------------


CURRENT = {
    "phase": "Ready",
    "conditions": [{"type": "Ready", "status": "True", "reason": "Up", "message": "", "lastTransitionTime": OLD}],
}


@pytest.mark.parametrize(
    ("status", "conditions", "differs"),
    [
        ({}, [], False),
        ({"phase": "Ready"}, [], False),
        ({"phase": "Scaling"}, [], True),
        ({"replicas": 3}, [], True),
        ({}, [{"type": "Ready", "status": "True", "reason": "Up", "message": ""}], False),
        ({}, [{"type": "Ready", "status": "False", "reason": "Up", "message": ""}], True),
        ({}, [{"type": "Ready", "status": "True", "reason": "Up", "message": "now with a message"}], True),
        ({}, [{"type": "Degraded", "status": "False"}], True),
    ],
)
def test_status_differs(status: dict[str, Any], conditions: list[dict[str, Any]], differs: bool) -> None:
    assert requests.status_differs(CURRENT, status, conditions) is differs


# -- who the run is for --------------------------------------------------------------------------------


def test_is_owner_without_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(requests.OWNER_ENV, raising=False)
    assert requests.owner() is None
    assert not requests.is_owner("cache.example.com/v1alpha1", "Memcached", "web", "shop")


@pytest.mark.parametrize("raw", ["not json", '["a list"]', ""])
def test_is_owner_with_an_unusable_env(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(requests.OWNER_ENV, raw)
    assert requests.owner() is None
    assert not requests.is_owner("cache.example.com/v1alpha1", "Memcached", "web", "shop")


@pytest.mark.parametrize(
    ("args", "owned"),
    [
        (("cache.example.com/v1alpha1", "Memcached", "web", "shop"), True),
        (("cache.example.com/v1alpha1", "Memcached", "web", "other"), False),
        (("cache.example.com/v1alpha1", "Memcached", "db", "shop"), False),
        (("cache.example.com/v1", "Memcached", "web", "shop"), False),
        (("cache.example.com/v1alpha1", "Memcache", "web", "shop"), False),
        (("cache.example.com/v1alpha1", "Memcached", "web", None), False),
    ],
)
def test_is_owner(monkeypatch: pytest.MonkeyPatch, args: tuple[str, str, str, str | None], owned: bool) -> None:
    monkeypatch.setenv(requests.OWNER_ENV, json.dumps(OWNER))
    assert requests.owner() == OWNER
    assert requests.is_owner(*args) is owned


@pytest.mark.parametrize("namespace", [None, ""])
def test_is_owner_cluster_scoped(monkeypatch: pytest.MonkeyPatch, namespace: str | None) -> None:
    monkeypatch.setenv(requests.OWNER_ENV, json.dumps({**OWNER, "kind": "Cluster", "namespace": ""}))
    assert requests.is_owner("cache.example.com/v1alpha1", "Cluster", "web", namespace)


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("cache.example.com/v1alpha1", "Memcached"),
        ("cert-manager.k8s.io/v1", "Certificate"),
        ("v1", "ConfigMap"),
    ],
)
def test_owner_var_name_matches_the_runtimes_extra_var(api_version: str, kind: str) -> None:
    group = api_version.rpartition("/")[0]
    assert requests.owner_var_name(api_version, kind) == object_var_name(group, kind)


def test_plain_turns_string_subclasses_and_tuples_into_json_types() -> None:
    class Tagged(str):
        pass

    value = requests.plain({"a": Tagged("x"), "b": (1, Tagged("y")), 3: None})
    assert value == {"a": "x", "b": [1, "y"], "3": None}
    assert type(value["a"]) is str
    assert type(value["b"][1]) is str
