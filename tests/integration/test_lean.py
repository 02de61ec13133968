"""The lean path against Ansible's own steps (``warm.lean``): the differential tests of the corpus.

Two warm executors, one with the lean path on and one with it off (``HYBRID_OPERATOR_LEAN=0``), run the
same role on the same object; ``tests.paths.differences`` compares what the API server received, the
``RunResult``, the job events, ``stdout`` and the artifact files. Every difference is a bug of the lean path.
The corpus: the warm executor's fixture roles (templating, loops, blocks with rescue and always, includes,
handlers, modules that fail and die), ``roles/foo`` on a new Foo and on one whose Deployment someone else
owns and the heavy bench role, each through a recording API proxy; operator-sdk's test project and Kiali's
operator are in ``test_lean_upstream.py``, roles generated from the lean path's shapes in
``test_lean_shapes.py``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from hybrid_operator.ansible.compat import ansible_version
from hybrid_operator.ansible.running import ExecutorSettings, RunRequest
from hybrid_operator.ansible.warm.executor import WarmExecutor
from tests.paths import LEAN_MINOR, RecordingProxy, differences, executor_pair, recording_proxy, seen

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        ansible_version()[:2] < LEAN_MINOR, reason="the lean path needs ansible-core 2.21 (see warm.lean)"
    ),
]
ROOT = Path(__file__).resolve().parents[2]
WARM_ROLES = ROOT / "tests" / "fixtures" / "projects" / "warm" / "roles"
ROLES = (WARM_ROLES, ROOT / "roles", ROOT / "bench" / "projects" / "heavy" / "roles")
# What the API server assigns, as it shows in a result printed whole (at -vv): resourceVersions, timestamps.
SERVER_ASSIGNED_IN_TEXT = (
    re.compile(r'\\?"resourceVersion\\?": \\?"\d+'),
    re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"),
)
SNEAKY = """---
- name: Read a ConfigMap named from the spec
  kubernetes.core.k8s_info:
    kind: ConfigMap
    namespace: ns
    name: "{{ target }}"
"""


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WarmExecutor, WarmExecutor]]:
    """(Ansible's own steps, the lean path): two warm executors on the same settings."""
    root = tmp_path_factory.mktemp("lean")
    tasks = root / "roles" / "sneaky" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(SNEAKY)
    paths = (*ROLES, root / "roles")
    settings = ExecutorSettings(artifacts_root=root / "engine", roles_paths=paths, module_server=True)
    with executor_pair(settings, root / "lean") as pair:
        yield pair


@pytest.fixture(scope="module")
def proxy(kubeconfig: str) -> Iterator[RecordingProxy]:
    with recording_proxy(kubeconfig) as recording:
        yield recording


def request(
    role: str, obj: dict[str, Any], env: dict[str, str] | None = None, run_id: str = "", verbosity: int = 0
) -> RunRequest:
    group, _, version = obj["apiVersion"].rpartition("/")
    return RunRequest(
        run_id=run_id or uuid.uuid4().hex[:12],
        group=group,
        version=version,
        kind=obj["kind"],
        obj=obj,
        role=role,
        env=env or {},
        max_artifacts=5,
        verbosity=verbosity,
    )


def test_the_lean_path_is_on_and_says_so(pair: tuple[WarmExecutor, WarmExecutor]) -> None:
    engine, lean_run = pair
    obj = _warm_object("said", {"x": 1})
    assert lean_run.run(request("structure", obj, _owner_env(obj))).path == "lean"
    assert lean_run.run(request("warm", obj, _owner_env(obj))).path == "mixed"  # add_host, group_by: a worker
    assert engine.run(request("warm", obj, _owner_env(obj))).path == ""  # off: no report at all


@pytest.mark.parametrize(
    ("role", "spec"),
    [
        ("warm", {"x": 1}),
        ("warm", {"mode": "fail"}),
        ("warm", {"mode": "rescued"}),
        ("warm", {"message": "{{ 7 * 6 }}"}),
        ("structure", {}),
        ("modules", {"x": 3}),
        ("modules", {"mode": "die"}),
    ],
)
def test_the_warm_fixture_roles_are_the_same(
    pair: tuple[WarmExecutor, WarmExecutor], tmp_path: Path, role: str, spec: dict[str, Any]
) -> None:
    engine, lean_run = pair
    obj = _warm_object(f"{role}-{len(spec)}", spec)
    runs = []
    for name, executor in (("engine", engine), ("lean", lean_run)):
        out = tmp_path / name
        out.mkdir()
        result = executor.run(request(role, obj, {**_owner_env(obj), "MODULES_DIR": str(out)}))
        runs.append(seen(executor, result))
    assert [run.result.loaded_ahead for run in runs] == [False, True]
    found = differences(*runs, {str(tmp_path / "engine"): "<dir>", str(tmp_path / "lean"): "<dir>"})
    assert not found, "\n".join(found)


def test_a_new_foo_is_the_same(
    pair: tuple[WarmExecutor, WarmExecutor], proxy: RecordingProxy, api: client.ApiClient, crds: None, tmp_path: Path
) -> None:
    spec = {"deploymentName": "web", "replicas": 2}
    _compare_in_namespaces(
        pair, proxy, api, tmp_path, "foo", ("samplecontroller.k8s.io", "v1alpha1", "foos", "Foo"), spec
    )


def test_a_new_foo_at_operator_sdks_verbosity_is_the_same(
    pair: tuple[WarmExecutor, WarmExecutor], proxy: RecordingProxy, api: client.ApiClient, crds: None, tmp_path: Path
) -> None:
    """At -vv (operator-sdk's default) a run shows what loading its role says (``statically imported: ...``):
    the lean run, whose playbook the zygote loaded, shows it too, at the same place."""
    spec = {"deploymentName": "web", "replicas": 2}
    kind = ("samplecontroller.k8s.io", "v1alpha1", "foos", "Foo")
    stdout = _compare_in_namespaces(pair, proxy, api, tmp_path, "foo", kind, spec, verbosity=2)
    assert "statically imported" in stdout


def test_a_foo_whose_deployment_is_someone_elses_is_the_same(
    pair: tuple[WarmExecutor, WarmExecutor], proxy: RecordingProxy, api: client.ApiClient, crds: None, tmp_path: Path
) -> None:
    """The role's other branch: the status marked failed, a failed task, no Deployment touched."""

    def theirs(namespace: str) -> None:
        body = {
            "metadata": {"name": "taken"},
            "spec": {
                "selector": {"matchLabels": {"app": "taken"}},
                "template": {
                    "metadata": {"labels": {"app": "taken"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        }
        client.AppsV1Api(api).create_namespaced_deployment(namespace, body)

    spec = {"deploymentName": "taken", "replicas": 1}
    kind = ("samplecontroller.k8s.io", "v1alpha1", "foos", "Foo")
    _compare_in_namespaces(pair, proxy, api, tmp_path, "foo", kind, spec, before=theirs)


def test_the_heavy_role_is_the_same(
    pair: tuple[WarmExecutor, WarmExecutor], proxy: RecordingProxy, api: client.ApiClient, tmp_path: Path
) -> None:
    from tests.integration.conftest import install_crds

    install_crds(api, [ROOT / "bench" / "crds" / "heavy.yaml"], replace=False)
    spec = {"version": "v1.2", "deployment": {"replicas": 1}}
    kind = ("bench.hybrid-operator.dev", "v1alpha1", "heavies", "Heavy")
    _compare_in_namespaces(pair, proxy, api, tmp_path, "heavy", kind, spec, derive=_heavy_signing_key)


def _heavy_signing_key(obj: dict[str, Any]) -> dict[str, str]:
    """The heavy role's signing key: a digest of the object's uid and name (tasks/settings.yml)."""
    meta = obj["metadata"]
    key = hashlib.sha256(f"{meta['uid']}{meta['name']}".encode()).hexdigest()[:32]
    return {base64.b64encode(key.encode()).decode(): "<signing key, base64>", key: "<signing key>"}


def test_api_modules_run_in_the_runs_process(
    pair: tuple[WarmExecutor, WarmExecutor], proxy: RecordingProxy, api: client.ApiClient, crds: None, tmp_path: Path
) -> None:
    """A Foo's two ``kubernetes.core`` modules: forked on Ansible's path, in the run's process on the lean
    path (a profiled run writes a profile per forked module, ``warm.profiling``)."""
    namespace = f"lean-modules-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    try:
        body = {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "m"}}
        body["spec"] = {"deploymentName": "m", "replicas": 1}
        obj = client.CustomObjectsApi(api).create_namespaced_custom_object(
            "samplecontroller.k8s.io", "v1alpha1", namespace, "foos", body
        )
        forked = {}
        for label, executor in zip(("engine", "lean"), pair, strict=True):
            profiles = tmp_path / label
            profiles.mkdir()
            run_id = uuid.uuid4().hex[:12]
            env = {**proxy.env_for(obj, run_id, tmp_path), "HYBRID_OPERATOR_PROFILE_DIR": str(profiles)}
            assert executor.run(request("foo", obj, env, run_id)).succeeded
            forked[label] = len(list(profiles.glob("module-*.prof")))
        assert forked == {"engine": 2, "lean": 0}
    finally:
        client.CoreV1Api(api).delete_namespace(namespace, propagation_policy="Background")


def test_a_name_from_the_object_is_still_checked_in_the_runs_process(
    pair: tuple[WarmExecutor, WarmExecutor], proxy: RecordingProxy, tmp_path: Path
) -> None:
    """The run's ``sitecustomize`` wraps the Kubernetes client in every process of a run: a module in the
    run's own process refuses a path-changing name before any request, as a forked one does."""
    messages = []
    for executor in pair:
        obj = _warm_object("sneaky", {"target": "../../b/secrets/db"})
        run_id = uuid.uuid4().hex[:12]
        result = executor.run(request("sneaky", obj, proxy.env_for(obj, run_id, tmp_path), run_id))
        messages.append([t.message for t in result.failed_tasks])
        assert not [r for r in proxy.of(run_id) if "secrets" in r[1] or "/ns/" in r[1]]  # refused before a request
    assert messages[0] == messages[1] and "refused by hybrid-operator" in messages[1][0]


# -- helpers


def _warm_object(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    return {"apiVersion": "test.hybrid-operator.dev/v1", "kind": "Warm", "metadata": meta, "spec": spec}


def _owner_env(obj: dict[str, Any]) -> dict[str, str]:
    import json

    meta = obj["metadata"]
    owner = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "namespace": meta["namespace"]}
    return {"HYBRID_OPERATOR_OWNER": json.dumps(owner)}


def _compare_in_namespaces(
    pair: tuple[WarmExecutor, WarmExecutor],
    proxy: RecordingProxy,
    api: client.ApiClient,
    tmp_path: Path,
    role: str,
    kind: tuple[str, str, str, str],
    spec: dict[str, Any],
    before: Any = None,
    derive: Callable[[dict[str, Any]], dict[str, str]] = lambda _obj: {},
    verbosity: int = 0,
) -> str:
    """The role on a new object of ``kind`` in a namespace of each path's own, compared; ``derive``: values
    the role derives from the object's uid or namespace, and their placeholders. The lean run's stdout."""
    group, version, plural, kind_name = kind
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    runs, names = [], {}
    for label, executor in zip(("engine", "lean"), pair, strict=True):
        namespace = f"lean-{label}-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": namespace}})
        try:
            if before is not None:
                before(namespace)
            body = {"apiVersion": f"{group}/{version}", "kind": kind_name, "metadata": {"name": "obj"}, "spec": spec}
            obj = custom.create_namespaced_custom_object(group, version, namespace, plural, body)
            run_id = uuid.uuid4().hex[:12]
            result = executor.run(request(role, obj, proxy.env_for(obj, run_id, tmp_path), run_id, verbosity))
            runs.append(seen(executor, result, proxy.of(run_id)))
            names[namespace] = "<namespace>"
            names[obj["metadata"]["uid"]] = "<uid>"
            for derived, placeholder in derive(obj).items():
                names[derived] = placeholder
        finally:
            core.delete_namespace(namespace, propagation_policy="Background")
    assert runs[1].result.path == "lean"
    # The lean run's playbook was the zygote's, loaded ahead (``warm.plays``); the other loaded its own.
    assert (runs[0].result.loaded_ahead, runs[1].result.loaded_ahead) == (False, True)
    # At -vv a result is printed whole: what the API server assigned shows in the text too.
    found = differences(runs[0], runs[1], names, SERVER_ASSIGNED_IN_TEXT if verbosity else ())
    assert not found, "\n".join(found)
    return runs[1].stdout
