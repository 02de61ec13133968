"""The lean path against Ansible's own steps on operator-sdk's test projects and Kiali's operator, unchanged.

The corpus part of the differential tests (``tests/integration/test_lean.py`` has the method) that is not
ours: operator-sdk's memcached-molecule-operator (fetched by ``hack/upstream-testdata.sh``), each of its
playbooks on its sample object, through two warm executors (the lean path on and off) and a recording API
proxy, every difference a bug of the lean path; and Kiali's operator when ``KIALI_OPERATOR_DIR`` names a
checkout (its ``kiali-deploy`` playbook's first run on a new Kiali). Each object lives in a namespace of each
path's own. The memcached role bumps its metrics once per machine (a marker file): the marker is removed
before each run, so both paths take the same branch; this file shares the ``memcached`` group of
``tests/conftest.py`` with the other users of that marker.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from hybrid_operator.ansible.compat import ansible_version
from hybrid_operator.ansible.running import ExecutorSettings, RunRequest
from hybrid_operator.ansible.warm.executor import WarmExecutor
from tests.integration.conftest import ROOT, install_crds, upstream_project
from tests.paths import LEAN_MINOR, RecordingProxy, differences, executor_pair, recording_proxy, seen

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        ansible_version()[:2] < LEAN_MINOR, reason="the lean path needs ansible-core 2.21 (see warm.lean)"
    ),
]
METRICS_MARKER = Path("/tmp/metricsbumped")  # the memcached role's once-a-machine marker
MEMCACHED_KINDS = ("memcached", "foo", "memfin")


@pytest.fixture(scope="module")
def project(api: client.ApiClient) -> Path:
    return upstream_project(api)


@pytest.fixture(scope="module")
def pair(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WarmExecutor, WarmExecutor]]:
    root = tmp_path_factory.mktemp("lean-upstream")
    playbooks = tuple(project / "playbooks" / f"{kind}.yml" for kind in MEMCACHED_KINDS)  # as watches.yaml names them
    settings = ExecutorSettings(
        artifacts_root=root / "engine",
        roles_paths=(project / "roles",),
        module_server=True,
        prepared_playbooks=playbooks,
    )
    with executor_pair(settings, root / "lean") as pair:
        yield pair


@pytest.fixture(scope="module")
def proxy(kubeconfig: str) -> Iterator[RecordingProxy]:
    with recording_proxy(kubeconfig) as recording:
        yield recording


@pytest.mark.parametrize("kind", MEMCACHED_KINDS)
def test_memcached_molecule_operators_playbooks_are_the_same(
    pair: tuple[WarmExecutor, WarmExecutor],
    proxy: RecordingProxy,
    api: client.ApiClient,
    project: Path,
    tmp_path: Path,
    kind: str,
) -> None:
    sample = yaml.safe_load((project / "config" / "samples" / f"cache_v1alpha1_{kind}.yaml").read_text())
    runs, names = [], dict[str, str]()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    plural = f"{kind}s" if kind != "memcached" else "memcacheds"
    try:
        for label, executor in zip(("engine", "lean"), pair, strict=True):
            namespace = f"lean-up-{label}-{uuid.uuid4().hex[:6]}"
            core.create_namespace({"metadata": {"name": namespace}})
            obj = custom.create_namespaced_custom_object("cache.example.com", "v1alpha1", namespace, plural, sample)
            METRICS_MARKER.unlink(missing_ok=True)
            run_id = uuid.uuid4().hex[:12]
            result = executor.run(
                RunRequest(
                    run_id=run_id,
                    group="cache.example.com",
                    version="v1alpha1",
                    kind=obj["kind"],
                    obj=obj,
                    playbook=project / "playbooks" / f"{kind}.yml",
                    env=proxy.env_for(obj, run_id, tmp_path),
                    max_artifacts=5,
                )
            )
            runs.append(seen(executor, result, proxy.of(run_id)))
            names |= {namespace: "<namespace>", obj["metadata"]["uid"]: "<uid>"}
            core.delete_namespace(namespace, propagation_policy="Background")
    finally:
        METRICS_MARKER.unlink(missing_ok=True)
    assert runs[1].result.path in ("lean", "mixed")
    assert [run.result.loaded_ahead for run in runs] == [False, True]  # the zygote's, on the lean path
    found = differences(runs[0], runs[1], names)
    assert not found, "\n".join(found)


CHECKOUT = os.environ.get("KIALI_OPERATOR_DIR", "")
# What Kiali's playbook makes differ by itself: the time it started and ended (set_fact of strftime, printed
# and subtracted), the time in its last-updated annotation (lookup of `date`), its signing key (a random
# password of 32 letters and digits, base64-encoded); and the name the API server gives the service account
# token's volume of the stand-in pod the role reads.
KIALI_BY_CHANCE = (
    re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"),
    re.compile(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \w+ \d{4}"),
    re.compile(r"kube-api-access-[a-z0-9]{5}"),
    re.compile(r"Processing time: \[\d+\] seconds"),
    re.compile(r"\b[A-Za-z0-9+/]{43}="),
)


@pytest.mark.skipif(not CHECKOUT, reason="set KIALI_OPERATOR_DIR to a checkout of github.com/kiali/kiali-operator")
def test_kialis_first_reconcile_is_the_same(
    proxy: RecordingProxy,
    api: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kiali's ``kiali-deploy`` playbook on a new Kiali, as ``test_upstream_kiali`` runs it (the HOME, the
    environment and the stand-in for the operator's pod that ``hack/upstream-kiali.sh`` describes)."""
    home = tmp_path_factory.mktemp("kiali") / "home"
    out = subprocess.run(
        [str(ROOT / "hack" / "upstream-kiali.sh"), str(home)], capture_output=True, text=True, check=False, timeout=120
    )
    assert out.returncode == 0, out.stderr
    install_crds(api, [home / "crds" / "kiali.io_kialis.yaml"], replace=False)
    described = json.loads((home / "hybrid-operator-run.json").read_text())
    # The operator's own environment (Ansible's settings among it), which its executor's zygote starts from.
    for key, value in {**described["env"], "ANSIBLE_ALLOW_BROKEN_CONDITIONALS": "true"}.items():
        monkeypatch.setenv(key, value)
    playbook = home / "playbooks" / "kiali-deploy.yml"
    settings = ExecutorSettings(
        artifacts_root=home / "engine",
        roles_paths=(home / "roles",),
        module_server=True,
        prepared_playbooks=(playbook,),
    )
    pair = executor_pair(settings, home / "lean")
    runs, names = [], dict[str, str]()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    pod = described["pod"]
    image = f"quay.io/kiali/kiali-operator:{pod['labels']['version']}"
    with pair as executors:
        for label, executor in zip(("engine", "lean"), executors, strict=True):
            namespace = f"lean-kiali-{label}-{uuid.uuid4().hex[:6]}"
            core.create_namespace({"metadata": {"name": namespace}})
            stand_in = {"name": pod["name"], "labels": pod["labels"]}
            core.create_namespaced_pod(
                namespace, {"metadata": stand_in, "spec": {"containers": [{"name": "operator", "image": image}]}}
            )
            body = {"apiVersion": "kiali.io/v1alpha1", "kind": "Kiali", "metadata": {"name": "kiali"}}
            obj = custom.create_namespaced_custom_object("kiali.io", "v1alpha1", namespace, "kialis", body)
            run_id = uuid.uuid4().hex[:12]
            env = {"POD_NAMESPACE": namespace}
            result = executor.run(
                RunRequest(
                    run_id=run_id,
                    group="kiali.io",
                    version="v1alpha1",
                    kind="Kiali",
                    obj=obj,
                    playbook=playbook,
                    env={**env, **proxy.env_for(obj, run_id, tmp_path)},
                    max_artifacts=5,
                )
            )
            runs.append(seen(executor, result, proxy.of(run_id)))
            names |= {namespace: "<namespace>", obj["metadata"]["uid"]: "<uid>"}
            _remove_cluster_scoped(api, f"{namespace}/kiali")
            custom.patch_namespaced_custom_object(
                "kiali.io", "v1alpha1", namespace, "kialis", "kiali", {"metadata": {"finalizers": None}}
            )
            core.delete_namespace(namespace, propagation_policy="Background")
    assert runs[1].result.path in ("lean", "mixed")
    assert [run.result.loaded_ahead for run in runs] == [False, True]
    found = differences(runs[0], runs[1], names, KIALI_BY_CHANCE)
    assert not found, "\n".join(found)


def _remove_cluster_scoped(api: client.ApiClient, owner: str) -> None:
    """The ClusterRole and ClusterRoleBinding a Kiali's run made (marked with its owner annotation)."""
    rbac = client.RbacAuthorizationV1Api(api)
    for kind in ("cluster_role", "cluster_role_binding"):
        for item in getattr(rbac, f"list_{kind}")().items:
            if (item.metadata.annotations or {}).get("operator-sdk/primary-resource") == owner:
                getattr(rbac, f"delete_{kind}")(item.metadata.name)
