"""The action plugins the zygote loads for every run (``warm.actions``): which task names it finds in parsed
role files, that nothing but a plugin name gets through, and that after the preload a run of the role finds
each of its action plugins already loaded. Loading changes Ansible's plugin loader for the whole process,
so that part runs in a child interpreter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.ansible.warm import actions
from tests.unit.ansible.warm.speedups import OFF_HERE, in_child

REPO = Path(__file__).resolve().parents[4]

_CHILD = r"""
import json, sys
from pathlib import Path
from ansible.plugins.loader import action_loader, init_plugin_loader
from hybrid_operator.ansible.compat import ParsedFiles, parse_ahead
from hybrid_operator.ansible.warm import actions, project

init_plugin_loader()
files = project.role_files([Path(sys.argv[1])])
parsed = ParsedFiles()
parse_ahead([str(p) for p in files.yaml], parsed)
tried, loaded = actions.preload_role_actions(parsed.contents())
sources = []
original = action_loader._load_module_source
def counting(**kwargs):
    sources.append(kwargs.get("path"))
    return original(**kwargs)
action_loader._load_module_source = counting
found = {}
for name in actions.action_names(parsed.contents()):
    found[name] = action_loader.get(name, class_only=True) is not None
print(json.dumps({"tried": tried, "loaded": loaded, "found": found, "sources": sources}))
"""


# The zygote takes the names from the role files it parsed ahead (``warm.parsed``), which 2.18 does not do.
needs_parsed_files = pytest.mark.skipif(OFF_HERE, reason="role files are not parsed ahead on this ansible-core")


def _preload_in_child(roles: Path, **env: str) -> dict[str, Any]:
    collections = str(REPO / "hybrid_operator" / "collections")
    result: dict[str, Any] = in_child(_CHILD, str(roles), env={"ANSIBLE_COLLECTIONS_PATH": collections, **env})
    return result


@needs_parsed_files
def test_the_foo_roles_action_plugins_are_loaded_ahead_and_a_run_loads_none_again() -> None:
    result = _preload_in_child(REPO / "roles")
    found = {name for name, ok in result["found"].items() if ok}
    assert {"kubernetes.core.k8s", "kubernetes.core.k8s_info", "hybrid_operator.util.k8s_status"} <= found
    assert "operator_sdk.util.requeue_after" in found  # a redirect resolves to the plugin it names
    assert result["loaded"] == len(found)
    assert result["sources"] == []  # every plugin a run of these roles asks for is already loaded


@needs_parsed_files
def test_the_switch_leaves_the_roles_plugins_to_the_runs() -> None:
    result = _preload_in_child(REPO / "roles", **{actions.DISABLE_ENV: "0"})
    assert (result["tried"], result["loaded"]) == (0, 0)
    assert any("k8s" in str(path) for path in result["sources"])  # the run loads them itself, as before


def test_names_come_from_tasks_at_any_depth_and_short_ones_under_the_roles_collections() -> None:
    tasks = [
        {"name": "a", "kubernetes.core.k8s": {"state": "present"}},
        {"block": [{"rescue": [{"my.coll.thing": None}]}, {"k8s_info": {}}], "when": "x"},
    ]
    meta = {"collections": ["kubernetes.core", "operator_sdk.util", "not a collection", 3]}
    names = actions.action_names([tasks, meta])
    assert names[:2] == ["kubernetes.core.k8s", "my.coll.thing"]  # in the order found
    assert {"kubernetes.core.k8s_info", "operator_sdk.util.k8s_info"} <= set(names)
    assert not {"kubernetes.core.name", "kubernetes.core.when", "kubernetes.core.block"} & set(names)  # keywords
    assert not any("not a collection" in name for name in names)


def test_nothing_but_a_plugin_name_gets_through() -> None:
    hostile = [
        {
            "../../etc/passwd": 1,
            "a.b.c.d": 1,
            "{{ lookup('pipe', 'id') }}": 1,
            "x.y": 1,
            "kubernetes.core.k8s\n": 1,
            "é.b.c": 1,
        }
    ]
    assert actions.action_names(hostile) == []


def test_the_names_tried_are_bounded() -> None:
    many = [{f"c.c.task_{i}": None} for i in range(actions.MAX_NAMES * 3)]
    assert len(actions.action_names([many])) == actions.MAX_NAMES


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_json, max_size=4))
def test_any_parsed_data_gives_only_fully_qualified_names(data: list[Any]) -> None:
    names = actions.action_names(data)
    assert len(names) == len(set(names)) <= actions.MAX_NAMES
    assert all(actions._FQCN.fullmatch(name) for name in names)
