"""From an empty directory to a reconciling operator: new, create api, generate crds, reconcile, run, Molecule.

A project is scaffolded into a temporary directory with the real ``hybrid-operator`` command, its role gets a
spec field in its argument spec, the regenerated CRD goes to the real API server, which must refuse a wrong
type and take a right one; then ``reconcile FILE`` (with and without --check), ``run`` and the project's own
Molecule scenario must all bring the resource to ``Successful``. The project's files must pass yamllint and
ansible-lint at the production profile.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import ROOT, Objects, OperatorProcess, condition, wait_until

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent
KIND, PLURAL, VERSION = "Memcached", "memcacheds", "v1alpha1"


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "hybrid-operator"), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path, api: client.ApiClient) -> Iterator[tuple[Path, str]]:
    """A scaffolded project with one kind; its group is unique, so tests can share the cluster."""
    name = f"op-{uuid.uuid4().hex[:6]}"
    group = f"c{uuid.uuid4().hex[:6]}"
    assert cli("new", name, "--domain", "example.com", cwd=tmp_path).returncode == 0
    root = tmp_path / name
    done = cli("create", "api", "--group", group, "--version", VERSION, "--kind", KIND, cwd=root)
    assert done.returncode == 0, done.stderr
    full_group = f"{group}.example.com"
    yield root, full_group
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.delete_custom_resource_definition(f"{PLURAL}.{full_group}")
    except ApiException as exc:
        if exc.status != 404:
            raise


def add_size_option(root: Path) -> None:
    """What a role author does first: a spec field in the argument spec, used by the role."""
    specs = root / "roles" / "memcached" / "meta" / "argument_specs.yml"
    specs.write_text(
        specs.read_text().replace(
            "    options:\n",
            "    options:\n      size:\n        type: int\n        default: 1\n        description:\n"
            "          - spec.size. How many.\n",
            1,
        )
    )
    tasks = root / "roles" / "memcached" / "tasks" / "main.yml"
    tasks.write_text(
        tasks.read_text().replace('"{{ memcached_message }}"', '"{{ memcached_message }}, size {{ size }}"')
    )


def install_crd(api: client.ApiClient, root: Path) -> None:
    ext = client.ApiextensionsV1Api(api)
    doc = yaml.safe_load((root / "deploy" / "crds" / "memcached.yaml").read_text())
    ext.create_custom_resource_definition(doc)
    name = doc["metadata"]["name"]
    wait_until(
        lambda: any(
            c.type == "Established" and c.status == "True"
            for c in ext.read_custom_resource_definition(name).status.conditions or []
        ),
        60,
        f"CRD {name} established",
    )


def memcached(group: str, name: str, namespace: str, size: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": size},
    }


def test_scaffold_generate_reconcile_and_run(
    project: tuple[Path, str],
    api: client.ApiClient,
    objects: Objects,
    operator: Callable[..., OperatorProcess],
    tmp_path: Path,
) -> None:
    root, group = project
    ns = objects.namespace
    add_size_option(root)

    stale = cli("generate", "crds", "--check", cwd=root)
    assert stale.returncode == 1 and "+                size:" in stale.stdout, stale.stdout + stale.stderr
    assert cli("generate", "crds", cwd=root).returncode == 0
    assert cli("generate", "crds", "--check", cwd=root).returncode == 0
    install_crd(api, root)

    with pytest.raises(ApiException) as refused:
        objects.create(group, VERSION, PLURAL, memcached(group, "wrong", ns, "big"))
    assert refused.value.status == 422 and "spec.size" in str(refused.value.body)
    objects.create(group, VERSION, PLURAL, memcached(group, "by-run", ns, 3))

    art = ["--runner-artifacts-dir", str(tmp_path / "artifacts")]
    rehearsal_file = tmp_path / "rehearsal.yaml"
    rehearsal_file.write_text(yaml.safe_dump(memcached(group, "rehearsed", ns, 4)))
    rehearsed = cli("reconcile", str(rehearsal_file), "--check", *art, cwd=root)
    assert rehearsed.returncode == 0, rehearsed.stdout + rehearsed.stderr
    assert "TASK [" in rehearsed.stdout and "status it would write:" in rehearsed.stdout
    assert "message: Reconciled by the memcached role, size 4" in rehearsed.stdout
    assert objects.get(group, VERSION, PLURAL, "rehearsed") is None  # --check changed nothing

    once_file = tmp_path / "once.yaml"
    once_file.write_text(yaml.safe_dump(memcached(group, "once", ns, 2)))
    once = cli("reconcile", str(once_file), *art, cwd=root)
    assert once.returncode == 0, once.stdout + once.stderr
    assert "Write status.message" in once.stdout and "\nstatus:\n" in once.stdout
    obj = objects.successful(group, VERSION, PLURAL, "once")
    assert obj is not None and obj["status"]["message"] == "Reconciled by the memcached role, size 2"

    once_file.write_text(yaml.safe_dump(memcached(group, "once", ns, "two")))
    bad = cli("reconcile", str(once_file), *art, cwd=root)
    assert bad.returncode == 2 and "spec.size" in bad.stderr, bad.stdout + bad.stderr

    operator(root / "watches.yaml")
    obj = objects.wait_successful(group, VERSION, PLURAL, "by-run", 90)
    assert obj["status"]["message"] == "Reconciled by the memcached role, size 3"


def test_a_failed_run_exits_1_and_says_why(
    project: tuple[Path, str], api: client.ApiClient, objects: Objects, tmp_path: Path
) -> None:
    root, group = project
    tasks = root / "roles" / "memcached" / "tasks" / "main.yml"
    tasks.write_text(
        tasks.read_text() + "\n- name: Fail on purpose\n  ansible.builtin.fail:\n    msg: no memcached today\n"
    )
    install_crd(api, root)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({**memcached(group, "fails", objects.namespace, None), "spec": {}}))
    failed = cli(
        "reconcile", str(path), "--runner-artifacts-dir", str(tmp_path / "art"), "--executor", "runner", cwd=root
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "no memcached today" in failed.stderr and "Fail on purpose" in failed.stdout
    failure = condition(objects.get(group, VERSION, PLURAL, "fails"), "Failure")
    assert (
        failure is not None
        and failure["status"] == "True"
        and failure["message"].endswith("Fail on purpose: no memcached today")
    )


def test_the_generated_projects_own_lint_and_molecule_pass(project: tuple[Path, str], kubeconfig: str) -> None:
    root, _group = project
    env = {
        **os.environ,
        "KUBECONFIG": kubeconfig,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HYBRID_OPERATOR": str(BIN / "hybrid-operator"),
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "hybrid_operator" / "collections"),
    }
    for command in (["yamllint", "-s", "."], ["ansible-lint", "-q"]):
        done = subprocess.run(
            [str(BIN / command[0]), *command[1:]], cwd=root, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    env.pop("ANSIBLE_COLLECTIONS_PATH")
    molecule = subprocess.run(
        [str(BIN / "molecule"), "test", "-s", "default"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert molecule.returncode == 0, molecule.stdout[-6000:] + molecule.stderr[-6000:]
    # verify.yml fails when it finds no tasks/*_test.yml, so a pass means memcached_test.yml passed.
    assert "failed=0" in molecule.stderr and "verify" in molecule.stderr
