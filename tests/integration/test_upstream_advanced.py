"""operator-sdk's advanced-molecule-operator, unchanged, under our operator, checked by upstream's own tests.

Upstream generates the project with the operator-sdk CLI and tests it with Molecule against its image in a
kind cluster. Here hack/upstream-testdata.sh assembles it from ansible-operator-plugins' public source
(hack/upstream_advanced.py says what is upstream's, what is synthesized from the scaffold, and which image
paths stand for the assembled directory); nothing of it lives in this repository. One operator runs it as
its manager Deployment would: the project's watches.yaml, its quoted ``--ansible-args`` (the vault password
file), ``ANSIBLE_INVENTORY``, its ansible.cfg, all namespaces watched. Each kind's test runs upstream's
molecule verify file for that kind (``molecule/default/tasks/<kind>_test.yml``) with ansible-playbook against
the bed, as upstream's verify.yml does, in the namespace those files name (``osdk-test``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ansible.release import __version__ as ANSIBLE_VERSION
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import (
    ROOT,
    OperatorProcess,
    condition,
    install_crds,
    start_operator,
    stop_operator,
    wait_until,
)

pytestmark = pytest.mark.integration
NAMESPACE = "osdk-test"  # upstream's verify files name it (TEST_OPERATOR_NAMESPACE of its Molecule run)
EXTERNAL = "externalnamespace"  # made by the clusterannotationtest playbook
GROUP, VERSION = "test.example.com", "v1alpha1"
BIN = Path(sys.executable).parent
# Molecule's verify.yml for one file: the play upstream's verify tasks are written for.
VERIFY = """- hosts: localhost
  connection: local
  gather_facts: no
  collections:
    - kubernetes.core
  tasks:
    - include_tasks: "{{ task_file }}"
"""


@dataclass
class Advanced:
    project: Path
    operator: OperatorProcess
    verify: Path
    kubeconfig: str
    custom: client.CustomObjectsApi
    core: client.CoreV1Api


def apply_crds(api: client.ApiClient, project: Path) -> None:
    install_crds(api, sorted((project / "config" / "crd" / "bases").glob("*.yaml")), replace=False)


def delete_namespace(core: client.CoreV1Api, name: str) -> None:
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def namespace_gone(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespace(name)
    except ApiException as exc:
        return exc.status == 404
    return False


@pytest.fixture(scope="module")
def advanced(kubeconfig: str, api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Advanced]:
    root = tmp_path_factory.mktemp("advanced")
    project = root / "advanced-molecule-operator"
    out = subprocess.run(
        [str(ROOT / "hack" / "upstream-testdata.sh"), "advanced", str(project)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "PYTHON": sys.executable},
    )
    assert out.returncode == 0, out.stderr
    manifest = json.loads((project / "hybrid-operator-run.json").read_text())
    apply_crds(api, project)
    core = client.CoreV1Api(api)
    for name in (NAMESPACE, EXTERNAL):  # left by an interrupted run: start clean
        delete_namespace(core, name)
        wait_until(lambda n=name: namespace_gone(core, n), 120, f"namespace {name} gone")
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    # As its manager Deployment runs it: flags and environment of its manifests, every namespace watched.
    env = {**manifest["env"], "WATCH_NAMESPACE": ""}
    op = start_operator(
        kubeconfig, project / "watches.yaml", root / "operator", *manifest["args"], env=env, cwd=project
    )
    verify = root / "verify.yml"
    verify.write_text(VERIFY)
    custom = client.CustomObjectsApi(api)
    yield Advanced(project, op, verify, kubeconfig, custom, core)
    stop_operator(op)
    # A resource left with its finalizer (a failed test) would hold its namespace in Terminating.
    for item in custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "finalizerconcurrencytests")["items"]:
        body = {"metadata": {"finalizers": None}}
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, "finalizerconcurrencytests", item["metadata"]["name"], body
        )
    for name in (NAMESPACE, EXTERNAL):
        delete_namespace(core, name)


def start_verify(advanced: Advanced, kind: str) -> tuple[subprocess.Popen[bytes], Path]:
    """Upstream's verify tasks for one kind, as its Molecule verifier runs them (Molecule's inventory vars)."""
    extra = {
        "task_file": str(advanced.project / "molecule" / "default" / "tasks" / f"{kind}_test.yml"),
        "namespace": NAMESPACE,
        "config_dir": str(advanced.project / "config"),
        "samples_dir": str(advanced.project / "config" / "samples"),
        "ansible_python_interpreter": sys.executable,
    }
    log = advanced.verify.parent / f"verify-{kind}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "ansible-playbook"), "-i", "localhost,", str(advanced.verify), "-e", json.dumps(extra)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=advanced.verify.parent,
            env={**os.environ, "K8S_AUTH_KUBECONFIG": advanced.kubeconfig, "ANSIBLE_NOCOLOR": "1"},
        )
    return proc, log


def passed(advanced: Advanced, run: tuple[subprocess.Popen[bytes], Path]) -> None:
    proc, log = run
    code = proc.wait(timeout=500)
    output = log.read_text(errors="replace")
    assert code == 0, f"{output[-4000:]}\n--- operator log:\n{advanced.operator.log()[-4000:]}"
    assert "PLAY RECAP" in output and "failed=0" in output


KINDS = [
    "argstest",  # the vault file, through the manager's quoted --ansible-args
    "casetest",  # snakeCaseParameters: false
    "collectiontest",  # a role named by collection FQCN, from an installed collection
    "inventorytest",  # a play for a group of ANSIBLE_INVENTORY, its group_vars, a filter plugin of ansible.cfg
    "secretstest",  # a core kind (Secret) with a label selector, manageStatus: false
    "selectortest",  # a selector: the unlabelled resource is never reconciled (waits 30 s, as upstream)
    "finalizerconcurrencytest",  # the finalizer playbook runs while the main playbook would be paused
    "clusterannotationtest",  # cluster-scoped and other-namespace children: annotations, and watched
]


@pytest.fixture(scope="module")
def verifying(advanced: Advanced) -> Iterator[dict[str, tuple[subprocess.Popen[bytes], Path]]]:
    """Every kind's verify file started at once, each its own ansible-playbook, so that the selector test's
    fixed 30 s wait overlaps the others: the kinds are independent (own resources, own names), as in
    upstream's one Molecule run against one operator. Each test then waits for its kind's result."""
    runs = {kind: start_verify(advanced, kind) for kind in KINDS}
    yield runs
    for proc, _ in runs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# Upstream's finalizerconcurrencytest creates its resource and deletes it in the next task (both `wait: no`):
# when the operator has not seen it in between (all kinds start at once here, on 2 shared cores), the
# resource is gone before a finalizer was ever added, and nothing runs: a race in the test, not a
# difference of the operator (upstream's has it too). Seen in the log: no run of that resource at all.
RACY = "finalizerconcurrencytest"
RACY_NAME = "name=finalizer-concurrency-test "


@pytest.mark.parametrize("kind", KINDS)
def test_kind_passes_upstreams_verify_tasks(
    advanced: Advanced, verifying: dict[str, tuple[subprocess.Popen[bytes], Path]], kind: str
) -> None:
    if kind == RACY and verifying[kind][0].wait(timeout=500) != 0 and RACY_NAME not in advanced.operator.log():
        verifying[kind] = start_verify(advanced, kind)  # the race lost before any run: once more, alone
    passed(advanced, verifying[kind])


def test_reconciliationtest(advanced: Advanced) -> None:
    """requeue_after until a ConfigMap counts to 5. The playbook writes ``'{{ (x|int) + 1 }}'`` into the
    ConfigMap's data: a string on ansible-core 2.18, an integer on 2.19+ (native types), which the API server
    refuses. On 2.18 upstream's verify tasks run; on 2.19+ the failure is checked to be exactly that one."""
    if tuple(int(p) for p in ANSIBLE_VERSION.split(".")[:2]) < (2, 19):
        passed(advanced, start_verify(advanced, "reconciliationtest"))
        return
    name = "reconciliation-test"
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ReconciliationTest", "metadata": {"name": name}}
    advanced.custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "reconciliationtests", body)

    def failed() -> dict[str, Any] | None:
        obj = advanced.custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "reconciliationtests", name)
        failure = condition(obj, "Failure")
        return failure if failure and failure.get("status") == "True" else None

    failure = wait_until(failed, 90, "the ReconciliationTest's second run to fail")
    assert failure["message"].startswith("Update ConfigMap: Failed to patch object")
    # The API server's reason follows the whole patch it echoes: read it in the failed task's logged output.
    assert "cannot unmarshal number into Go struct field ConfigMap.data of type string" in advanced.operator.log()
    assert advanced.core.read_namespaced_config_map(name, NAMESPACE).data == {"iterations": "1"}


@pytest.mark.realnode
def test_subresourcestest(advanced: Advanced) -> None:
    """A busybox pod, then k8s_exec and k8s_log on it through the run's proxy, their output in the status."""
    passed(advanced, start_verify(advanced, "subresourcestest"))


def test_operator_log_is_clean(advanced: Advanced, verifying: dict[str, tuple[subprocess.Popen[bytes], Path]]) -> None:
    """After the work of every kind (each kind's verify tasks over, whatever their verdict: the kind's own
    test judges that), the log shows runs of each of those kinds and no error: no traceback, no line at
    ERROR level, and the warm executor never switched itself off."""
    for proc, _ in verifying.values():
        proc.wait(timeout=500)
    log = advanced.operator.log()
    ran = {m.group(1).split(".")[0].lower() for m in re.finditer(r" reconciled .*?\bkind=(\S+)", log)}
    # secretstest's kind is Secret; the racy kind may have lost its race before any run (see RACY).
    missing = [kind for kind in KINDS if kind not in ran and kind not in ("secretstest", RACY)]
    assert not missing, f"no run of {missing} in the log:\n{log[-4000:]}"
    assert "secret" in ran
    assert "Traceback" not in log
    assert not [line for line in log.splitlines() if " ERROR " in line[:40]], log[-4000:]
    assert "switched itself off" not in log
