"""The local test bed is a real Kubernetes: scheduling and fake nodes, schema validation, garbage collection,
and RBAC that really denies."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.integration.conftest import ROOT, Objects, wait_until

pytestmark = pytest.mark.integration


def test_deployment_of_two_becomes_available(objects: Objects) -> None:
    body = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        },
    }
    objects.apps.create_namespaced_deployment(objects.namespace, body)

    def available() -> int:
        dep = objects.apps.read_namespaced_deployment("web", objects.namespace)
        return dep.status.available_replicas or 0

    wait_until(lambda: available() == 2, 60, "availableReplicas 2")


def test_crd_schema_rejects_an_invalid_object(crds: None, objects: Objects) -> None:
    with pytest.raises(ApiException) as err:
        objects.create(
            "test.hybrid-operator.dev",
            "v1",
            "demos",
            {
                "apiVersion": "test.hybrid-operator.dev/v1",
                "kind": "Demo",
                "metadata": {"name": "bad"},
                "spec": {"message": 42},
            },
        )
    assert err.value.status == 422
    assert "spec.message" in err.value.body


def test_deleting_an_owner_garbage_collects_its_child(objects: Objects) -> None:
    owner = objects.core.create_namespaced_config_map(objects.namespace, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    objects.core.create_namespaced_config_map(
        objects.namespace, {"metadata": {"name": "child", "ownerReferences": [ref]}}
    )
    objects.core.delete_namespaced_config_map("owner", objects.namespace)

    def child_gone() -> bool:
        try:
            objects.core.read_namespaced_config_map("child", objects.namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_until(child_gone, 60, "the child to be garbage-collected")


def test_plain_user_has_no_rights(kubeconfig: str) -> None:
    user = Path(kubeconfig).with_name("user.kubeconfig")
    if not user.exists():
        pytest.skip("not the local test bed: no plain-user identity to test")
    api = config.new_client_from_config(config_file=str(user))
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api).list_namespaced_pod("default")
    assert err.value.status == 403


def test_status_reports_components_and_versions() -> None:
    out = subprocess.run(
        [str(ROOT / "hack" / "local-cluster.sh"), "status"], capture_output=True, text=True, check=True
    ).stdout
    if "kube-apiserver: running" not in out:
        pytest.skip("the local test bed is not the cluster in use")
    assert "kubernetes v1." in out
    for component in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        assert f"{component}: running" in out


def open_files(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            found.add(os.readlink(fd))
    return found


@pytest.mark.serial  # a whole second control plane, and the ports it frees checked: no other test meanwhile
def test_a_second_bed_runs_beside_and_down_leaves_nothing(tmp_path: Path) -> None:
    """Two beds side by side on free ports; `down` stops every process and frees every port."""

    env = {**os.environ, "LOCAL_CLUSTER_NAME": "side-by-side", "LOCAL_CLUSTER_DIR": str(tmp_path / "bed")}
    script = str(ROOT / "hack" / "local-cluster.sh")
    # A descriptor of the caller's (as `flock LOCK hack/local-cluster.sh up` holds its lock) stays with it.
    held = (tmp_path / "lock").open("w")
    with held:
        up = subprocess.run(
            [script, "up"], capture_output=True, text=True, env=env, check=True, timeout=300, pass_fds=[held.fileno()]
        )
    kubeconfig = up.stdout.strip().splitlines()[-1]
    api = config.new_client_from_config(config_file=kubeconfig)
    assert [n.metadata.name for n in client.CoreV1Api(api).list_node().items] == ["kwok-node-0"]
    ports = [int(line.split("=")[1]) for line in (tmp_path / "bed" / "ports").read_text().split()]
    pids = [int(p.read_text()) for p in (tmp_path / "bed" / "run").glob("*.pid")]
    assert len(pids) == 5
    for pid in pids:
        assert str(tmp_path / "lock") not in open_files(pid), f"pid {pid} holds its caller's descriptor"

    subprocess.run([script, "down"], capture_output=True, text=True, env=env, check=True, timeout=120)
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"pid {pid} survived down"
    for port in ports:
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still listening"
    assert not (tmp_path / "bed").exists()


@pytest.mark.serial  # a whole second control plane: no other test meanwhile
def test_up_right_after_the_beds_processes_were_signalled_starts_it_again(tmp_path: Path) -> None:
    """`up` just after every process of a bed got SIGTERM (a job's cleanup, Ctrl-C to their group): the old
    API server still drains, on the bed's ports. `up` stops what runs without answering, waits until it is
    gone and starts it again, instead of failing with "kube-controller-manager not ready after 60s"."""
    import os
    import signal
    import time

    env = {**os.environ, "LOCAL_CLUSTER_NAME": "resumed", "LOCAL_CLUSTER_DIR": str(tmp_path / "bed")}
    script = str(ROOT / "hack" / "local-cluster.sh")
    run = tmp_path / "bed" / "run"
    try:
        subprocess.run([script, "up"], capture_output=True, text=True, env=env, check=True, timeout=300)
        old = {pidfile.stem: int(pidfile.read_text()) for pidfile in run.glob("*.pid")}
        for pid in old.values():
            os.kill(pid, signal.SIGTERM)
        began = time.monotonic()
        again = subprocess.run([script, "up"], capture_output=True, text=True, env=env, timeout=300, check=False)
        took = time.monotonic() - began
        assert again.returncode == 0, again.stderr[-3000:]
        api = config.new_client_from_config(config_file=again.stdout.strip().splitlines()[-1])
        assert [n.metadata.name for n in client.CoreV1Api(api).list_node().items] == ["kwok-node-0"]
        new = {pidfile.stem: int(pidfile.read_text()) for pidfile in run.glob("*.pid")}
        assert new.keys() == old.keys()
        assert all(new[c] != old[c] for c in old), "a signalled process was taken for a running one"
        time.sleep(2)
        assert all(Path(f"/proc/{pid}").exists() for pid in new.values())
        print(f"\nup after SIGTERM to every process of the bed: ready again in {took:.0f}s")
    finally:
        subprocess.run([script, "down"], capture_output=True, text=True, env=env, timeout=180, check=False)
