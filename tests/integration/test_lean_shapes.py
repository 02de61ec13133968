"""Roles generated from the lean path's shapes, through both paths (``warm.lean``, ``tests.paths``).

Hypothesis writes a role of the shapes ``bench.shapes`` counted in operator roles (``set_fact``, ``debug``,
``assert``, ``fail``, an API module that fails, ``include_tasks``, ``import_tasks``; ``when``, loops over lists and over
registered results, ``register``, ``vars`` on tasks and blocks, ``ignore_errors``, ``failed_when``,
``changed_when``, ``no_log``, ``check_mode``, nested blocks whose failures land in ``rescue`` and
``always``), with role defaults, role vars and extra vars from the object's spec that shadow each other,
undefined and omitted values among them; both executors run it on the same object and every difference
fails the test. About a second per example on a quiet machine (two runs), ``LEAN_EXAMPLES`` of them
(default 25). Those roles are written after the executors started, so each run loads its own playbook; a
second test writes ``AHEAD`` generated roles before its executors start, so that the lean executor's zygote
loads their playbooks ahead (``warm.plays``) and its runs take them.
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NonInteractiveExampleWarning

from hybrid_operator.ansible.compat import ansible_version
from hybrid_operator.ansible.running import ExecutorSettings, RunRequest
from hybrid_operator.ansible.warm.executor import WarmExecutor
from tests.paths import LEAN_MINOR, differences, seen, warm_executor

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        ansible_version()[:2] < LEAN_MINOR, reason="the lean path needs ansible-core 2.21 (see warm.lean)"
    ),
]
EXAMPLES = int(os.environ.get("LEAN_EXAMPLES", "25"))
AHEAD = 8  # generated roles whose playbooks the lean executor's zygote loads ahead
VARS = ("alpha", "beta", "gamma", "delta")
_names = itertools.count()

# Values a variable may hold, and expressions over the variables (some fail: undefined, wrong types).
values = st.one_of(
    st.integers(-3, 3), st.sampled_from(["", "x", "yes", "{{ 1 + 1 }}"]), st.lists(st.integers(0, 2), max_size=3)
)
variable = st.sampled_from(VARS)
expressions = st.one_of(
    variable.map(lambda v: f"{{{{ {v} }}}}"),
    variable.map(lambda v: f"{{{{ {v} | default('unset') }}}}"),
    variable.map(lambda v: f"{{{{ {v} | default(omit) }}}}"),
    variable.map(lambda v: f"{{{{ ({v} | default(0) | int) + 1 }}}}"),
    variable.map(lambda v: f"{{{{ [{v} | default(1)] | length }}}}"),
    st.sampled_from(["{{ undefined_thing }}", "{{ ansible_operator_meta.name }}", "plain", "{{ range(3) | list }}"]),
)
conditions = st.one_of(
    variable.map(lambda v: f"{v} is defined"),
    variable.map(lambda v: f"{v} | default(0) | int > 0"),
    st.sampled_from(["true", "false", "registered is defined", "registered is failed", "missing | bool"]),
)


@st.composite
def keywords(draw: st.DrawFn) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if draw(st.booleans()):
        found["when"] = draw(conditions)
    if draw(st.integers(0, 4)) == 0:
        found["ignore_errors"] = True
    if draw(st.integers(0, 4)) == 0:
        found["vars"] = {draw(variable): draw(values)}
    if draw(st.integers(0, 6)) == 0:
        found["no_log"] = True
    return found


@st.composite
def tasks(draw: st.DrawFn, depth: int, may_include: bool = True) -> dict[str, Any]:
    """A task; ``may_include``: false in the included file itself (which would include itself forever)."""
    kinds = ["set_fact", "debug", "assert", "fail", "loop", "module"] + ["include", "import"] * may_include
    kind = draw(st.sampled_from(kinds + ["block"] * (depth < 2)))
    task: dict[str, Any] = {"name": f"{kind} {next(_names)}"}
    task.update(draw(blocks(depth, may_include) if kind == "block" else _ACTIONS[kind](depth)))
    if kind != "block" and draw(st.booleans()):
        task["register"] = "registered"
    if kind in ("set_fact", "debug") and draw(st.integers(0, 5)) == 0:
        task["changed_when"] = draw(conditions)
    if kind == "debug" and draw(st.integers(0, 5)) == 0:
        task["failed_when"] = draw(conditions)
    if kind in ("debug", "assert") and draw(st.integers(0, 6)) == 0:
        task["check_mode"] = True
    for key, value in draw(keywords()).items():
        task.setdefault(key, value)
    return task


@st.composite
def blocks(draw: st.DrawFn, depth: int, may_include: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"block": draw(st.lists(tasks(depth + 1, may_include), min_size=1, max_size=3))}
    if draw(st.booleans()):
        block["rescue"] = draw(st.lists(tasks(depth + 1, may_include), min_size=1, max_size=2))
    if draw(st.booleans()):
        block["always"] = draw(st.lists(tasks(depth + 1, may_include), min_size=1, max_size=2))
    return block


_LOOPS = ["{{ [1, 2] }}", "{{ registered.results | default([]) }}", "{{ alpha }}"]
_ACTIONS: dict[str, Any] = {
    "set_fact": lambda _d: st.builds(lambda v, e: {"ansible.builtin.set_fact": {v: e}}, variable, expressions),
    "debug": lambda _d: expressions.map(lambda e: {"ansible.builtin.debug": {"msg": e}}),
    "assert": lambda _d: st.builds(
        lambda c, q: {"ansible.builtin.assert": {"that": [c], "quiet": q}}, conditions, st.booleans()
    ),
    "fail": lambda _d: st.builds(lambda e, c: {"ansible.builtin.fail": {"msg": e}, "when": c}, expressions, conditions),
    "loop": lambda _d: st.sampled_from(_LOOPS).map(
        lambda loop: {
            "ansible.builtin.debug": {"msg": "{{ item }}"},
            "loop": loop,
            "loop_control": {"label": "{{ item | string }}"},
        }
    ),
    # An API module that cannot reach an API server: its failure, in the run's process or in a fork.
    "module": lambda _d: st.just(
        {
            "kubernetes.core.k8s_info": {"kind": "ConfigMap", "kubeconfig": "/nonexistent/kubeconfig"},
            "ignore_errors": True,
        }
    ),
    "include": lambda _d: st.just({"ansible.builtin.include_tasks": "included.yml"}),
    "import": lambda _d: st.just({"ansible.builtin.import_tasks": "included.yml"}),
}


@st.composite
def roles(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "tasks": draw(st.lists(tasks(0), min_size=1, max_size=8)),
        "included": draw(st.lists(tasks(1, may_include=False), min_size=1, max_size=3)),
        "defaults": draw(st.dictionaries(variable, values, max_size=3)),
        "vars": draw(st.dictionaries(variable, values, max_size=2)),
        "spec": draw(st.dictionaries(variable, values, max_size=2)),
    }


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, WarmExecutor, WarmExecutor]]:
    root = tmp_path_factory.mktemp("shapes")
    (root / "roles").mkdir()
    settings_ = ExecutorSettings(artifacts_root=root / "engine", roles_paths=(root / "roles",), module_server=True)
    engine = warm_executor(settings_, on=False)
    lean_run = warm_executor(
        ExecutorSettings(root / "lean", roles_paths=(root / "roles",), module_server=True), on=True
    )
    yield root / "roles", engine, lean_run
    engine.close()
    lean_run.close()


@pytest.fixture(scope="module")
def ahead(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[list[dict[str, Any]], WarmExecutor, WarmExecutor]]:
    """``AHEAD`` generated roles on the roles path before the executors start (hypothesis' examples, drawn
    once for the module), and the two executors."""
    root = tmp_path_factory.mktemp("shapes-ahead")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        drawn = [roles().example() for _ in range(AHEAD)]
    for index, role in enumerate(drawn):
        _write_role(root / "roles", f"ahead{index}", role)
    settings_ = ExecutorSettings(artifacts_root=root / "engine", roles_paths=(root / "roles",), module_server=True)
    engine = warm_executor(settings_, on=False)
    lean_run = warm_executor(
        ExecutorSettings(root / "lean", roles_paths=(root / "roles",), module_server=True), on=True
    )
    yield drawn, engine, lean_run
    engine.close()
    lean_run.close()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(role=roles())
def test_generated_roles_are_the_same_on_both_paths(
    generated: tuple[Path, WarmExecutor, WarmExecutor], role: dict[str, Any]
) -> None:
    roles_dir, engine, lean_run = generated
    name = f"gen{uuid.uuid4().hex[:8]}"
    _write_role(roles_dir, name, role)
    runs = _both(engine, lean_run, name, role)
    found = differences(runs[0], runs[1])
    assert not found, "\n".join(found) + "\n" + yaml.safe_dump(role, sort_keys=False)


@pytest.mark.parametrize("index", range(AHEAD))
def test_generated_roles_loaded_ahead_are_the_same(
    ahead: tuple[list[dict[str, Any]], WarmExecutor, WarmExecutor], index: int
) -> None:
    drawn, engine, lean_run = ahead
    role = drawn[index]
    runs = _both(engine, lean_run, f"ahead{index}", role)
    found = differences(runs[0], runs[1])
    assert not found, "\n".join(found) + "\n" + yaml.safe_dump(role, sort_keys=False)
    assert not runs[0].result.loaded_ahead  # the lean executor's runs took the zygote's playbook, the other's not
    assert runs[1].result.loaded_ahead


def _write_role(roles_dir: Path, name: str, role: dict[str, Any]) -> None:
    for folder, data in (
        ("tasks/main.yml", role["tasks"]),
        ("tasks/included.yml", role["included"]),
        ("defaults/main.yml", role["defaults"]),
        ("vars/main.yml", role["vars"]),
    ):
        path = roles_dir / name / folder
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _both(engine: WarmExecutor, lean_run: WarmExecutor, name: str, role: dict[str, Any]) -> list[Any]:
    """The role run on the same object by each executor, as each saw it."""
    meta = {"name": "shaped", "namespace": "ns", "uid": "uid-shaped"}
    obj = {"apiVersion": "test.hybrid-operator.dev/v1", "kind": "Shaped", "metadata": meta, "spec": role["spec"]}
    owner = {"apiVersion": obj["apiVersion"], "kind": "Shaped", "name": "shaped", "namespace": "ns"}
    runs = []
    for executor in (engine, lean_run):
        req = RunRequest(
            run_id=uuid.uuid4().hex[:12],
            group="test.hybrid-operator.dev",
            version="v1",
            kind="Shaped",
            obj=obj,
            role=name,
            env={"HYBRID_OPERATOR_OWNER": json.dumps(owner)},
            max_artifacts=2,
        )
        runs.append(seen(executor, executor.run(req)))
    return runs
