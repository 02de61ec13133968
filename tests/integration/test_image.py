"""The shipped image for real: loaded from the archive hack/build-image.sh wrote, run as deploy/ runs it.

``hack/test.sh`` runs these in a step of their own, after ``hack/build-image.sh``, with
``HYBRID_OPERATOR_IMAGE_ARCHIVE`` naming the sample operator's archive and ``HYBRID_OPERATOR_REQUIRE_IMAGE=1``
so that a missing image fails the run instead of skipping. The container runs with the manager
Deployment's args, env, user, read-only root filesystem and /tmp, on a token of its ServiceAccount mounted
where the kubelet mounts it, and `KUBERNETES_SERVICE_HOST/PORT` pointing at the test bed: the image, the
manifests and the RBAC are proven together. Only the listening ports differ (the container shares the
host's network, where the manifest's ports may be taken), given as later flags, which win.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.integration.conftest import (
    ROOT,
    free_port,
    https_get,
    service_account_token,
    successful,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.image]
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
READER_ROLE = "hybrid-operator-metrics-reader"


def engine(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The container engine hack/build-image.sh built with, on its storage."""
    return subprocess.run(
        [str(ROOT / "hack" / "build-image.sh"), "engine", *args],
        capture_output=True,
        text=True,
        check=check,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def image() -> str:
    """The sample operator's image, loaded from its archive (which proves the archive too)."""
    archive = os.environ.get("HYBRID_OPERATOR_IMAGE_ARCHIVE")
    if not archive:
        message = "no image: run hack/build-image.sh and set HYBRID_OPERATOR_IMAGE_ARCHIVE to the path it prints"
        if os.environ.get("HYBRID_OPERATOR_REQUIRE_IMAGE"):
            pytest.fail(message)
        pytest.skip(message)
    loaded = engine("load", "-i", archive).stdout
    # "Loaded image: localhost/hybrid-operator:<tag>" (Podman says "image(s)", Docker "image").
    line = next(x for x in loaded.splitlines() if x.startswith("Loaded image"))
    return line.split(": ", 1)[1].split(",")[0].strip()


def test_the_image_prints_its_version(image: str) -> None:
    out = engine("run", "--rm", "--read-only", image, "--version").stdout
    assert out.strip() == f"hybrid-operator {metadata.version('hybrid-operator')}"


def test_check_passes_on_the_baked_watches_file(image: str) -> None:
    out = engine("run", "--rm", "--read-only", "--network", "none", image, "check").stdout
    assert "Foo.v1alpha1.samplecontroller.k8s.io: role /opt/ansible/roles/foo" in out
    assert "VirtualMachine.v1alpha1.cloudnative.tw: role /opt/ansible/roles/virtualmachine" in out


# --------------------------------------------------------------------------- the Deployment, from deploy/


@dataclass
class Manager:
    """What deploy/ says about running the manager container."""

    namespace: str
    service_account: str
    args: list[str]
    env: dict[str, str]
    user: str
    read_only: bool
    tmpfs: list[str]
    drop_all_capabilities: bool
    no_new_privileges: bool


def rendered_deploy(kubeconfig: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail('kubectl not on PATH (eval "$(hack/local-cluster.sh env)")')
    out = subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "kustomize", str(ROOT / "deploy")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def manager_of(docs: list[dict[str, Any]]) -> Manager:
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "manager")
    security = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    empty_dirs = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
    return Manager(
        namespace=deployment["metadata"]["namespace"],
        service_account=pod["serviceAccountName"],
        args=list(container.get("args", [])),
        # Values only: valueFrom here reads optional Secrets (OpenStack credentials) the bed does not have.
        env={e["name"]: e["value"] for e in container.get("env", []) if "value" in e},
        user=f"{security['runAsUser']}:{security.get('runAsGroup', 0)}",
        read_only=bool(security.get("readOnlyRootFilesystem")),
        tmpfs=[m["mountPath"] for m in container.get("volumeMounts", []) if m["name"] in empty_dirs],
        drop_all_capabilities="ALL" in security.get("capabilities", {}).get("drop", []),
        no_new_privileges=security.get("allowPrivilegeEscalation") is False,
    )


@pytest.fixture
def deployed(kubeconfig: str, crds: None) -> Iterator[Manager]:
    """deploy/ applied to the bed, as `kubectl apply -k deploy/` does (the bed's fake node runs no pods)."""
    docs = rendered_deploy(kubeconfig)
    subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "apply", "-f", "-"],
        input=yaml.safe_dump_all(docs),
        capture_output=True,
        text=True,
        check=True,
    )
    yield manager_of(docs)


@dataclass
class Container:
    name: str
    health_port: int
    metrics_port: int

    def logs(self) -> str:
        done = engine("logs", self.name, check=False)
        return done.stdout + done.stderr

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=5) as resp:
                return resp.status == 200
        except OSError:
            return False

    def running(self) -> bool:
        state = engine("inspect", "--format", "{{.State.Running}}", self.name, check=False).stdout
        return state.strip() == "true"


def service_account_dir(api: client.ApiClient, kubeconfig: str, manager: Manager, where: Path) -> Path:
    """What the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount: token, ca.crt, namespace."""
    where.mkdir(mode=0o755)
    cluster = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]
    (where / "token").write_text(service_account_token(api, manager.namespace, manager.service_account))
    shutil.copyfile(cluster["certificate-authority"], where / "ca.crt")
    (where / "namespace").write_text(manager.namespace)
    for f in where.iterdir():
        f.chmod(0o644)  # the pod's fsGroup makes them readable by the container's user
    return where


def run_manager(image: str, manager: Manager, sa_dir: Path, kubeconfig: str, watch_namespace: str) -> Container:
    server = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    host, port = server.removeprefix("https://").rsplit(":", 1)
    container = Container(f"hyop-image-{uuid.uuid4().hex[:8]}", free_port(), free_port())
    env = {
        **manager.env,
        "WATCH_NAMESPACE": manager.env.get("WATCH_NAMESPACE") or watch_namespace,
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
    }
    cmd = ["run", "--detach", "--name", container.name, "--network", "host", "--user", manager.user]
    if manager.read_only:
        cmd.append("--read-only")
    for path in manager.tmpfs:
        cmd += ["--tmpfs", f"{path}:rw,exec,mode=1777"]  # an emptyDir: writable, not noexec
    if manager.drop_all_capabilities:
        cmd += ["--cap-drop", "ALL"]
    if manager.no_new_privileges:
        cmd += ["--security-opt", "no-new-privileges"]
    for name, value in env.items():
        cmd += ["--env", f"{name}={value}"]
    cmd += ["--volume", f"{sa_dir}:{SA_MOUNT}:ro", image, *manager.args]
    cmd += [
        f"--health-probe-bind-address=127.0.0.1:{container.health_port}",
        f"--metrics-bind-address=127.0.0.1:{container.metrics_port}",
        "--user-metrics-bind-address=127.0.0.1:0",
    ]
    engine(*cmd)
    return container


@pytest.fixture
def reader_token(api: client.ApiClient, namespace: str) -> Iterator[tuple[str, str]]:
    """Tokens of a ServiceAccount bound to the metrics-reader ClusterRole, and of one that is not."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    for name in ("prometheus", "stranger"):
        core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    binding = f"{namespace}-image-metrics-reader"
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
        }
    )
    yield service_account_token(api, namespace, "prometheus"), service_account_token(api, namespace, "stranger")
    rbac.delete_cluster_role_binding(binding)


def test_the_image_converges_a_foo_as_the_deployment_runs_it(
    image: str,
    deployed: Manager,
    api: client.ApiClient,
    kubeconfig: str,
    namespace: str,
    reader_token: tuple[str, str],
    tmp_path: Path,
) -> None:
    manager = deployed
    assert manager.read_only and SA_MOUNT not in manager.tmpfs and "/tmp" in manager.tmpfs
    watched = (manager.env.get("WATCH_NAMESPACE") or namespace).split(",")[0]
    sa_dir = service_account_dir(api, kubeconfig, manager, tmp_path / "serviceaccount")
    container = run_manager(image, manager, sa_dir, kubeconfig, namespace)
    try:
        wait_until(lambda: container.ready() or not container.running(), 120, "the operator in the image ready")
        assert container.running(), container.logs()

        custom, apps = client.CustomObjectsApi(api), client.AppsV1Api(api)
        name = f"image-{uuid.uuid4().hex[:6]}"
        foo = {
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": name},
            "spec": {"deploymentName": f"{name}-web", "replicas": 1},
        }
        custom.create_namespaced_custom_object("samplecontroller.k8s.io", "v1alpha1", watched, "foos", foo)

        def converged() -> bool:
            obj = custom.get_namespaced_custom_object("samplecontroller.k8s.io", "v1alpha1", watched, "foos", name)
            return successful(obj) and obj.get("status", {}).get("availableReplicas") == 1

        wait_until(converged, 120, "the Foo converged by the operator in the image")
        child = apps.read_namespaced_deployment(f"{name}-web", watched)
        assert [r.name for r in child.metadata.owner_references] == [name]

        # /metrics from the image: HTTPS, only for a caller bound to the metrics-reader ClusterRole.
        reader, stranger = reader_token
        assert https_get(container.metrics_port, "/metrics")[0] == 401
        assert https_get(container.metrics_port, "/metrics", stranger)[0] == 403
        status, body = https_get(container.metrics_port, "/metrics", reader)
        assert status == 200
        assert 'result="succeeded"' in body and "Foo.v1alpha1.samplecontroller.k8s.io" in body

        logs = container.logs()
        assert "forbidden" not in logs.lower(), logs
        custom.delete_namespaced_custom_object("samplecontroller.k8s.io", "v1alpha1", watched, "foos", name)

        # SIGTERM reaches the operator through tini, and it stops cleanly.
        engine("stop", "--time", "60", container.name, timeout=90)
        code = engine("inspect", "--format", "{{.State.ExitCode}}", container.name).stdout.strip()
        assert code == "0", container.logs()
    finally:
        if container.running():
            print(container.logs())
        engine("rm", "--force", container.name, check=False)


# --------------------------------------------------------------------------- an operator-sdk project on the base


@pytest.fixture(scope="module")
def base_image(image: str) -> str:
    """The base image, from the archive hack/build-image.sh wrote beside the sample's."""
    archive = Path(os.environ["HYBRID_OPERATOR_IMAGE_ARCHIVE"])
    loaded = engine(
        "load", "-i", str(archive.with_name(archive.name.replace("hybrid-operator.", "hybrid-operator-base.")))
    )
    line = next(x for x in loaded.stdout.splitlines() if x.startswith("Loaded image"))
    return line.split(": ", 1)[1].split(",")[0].strip()


def switched_dockerfile(original: str, base: str) -> tuple[str, list[str]]:
    """The project's Dockerfile on our base: its FROM line changed and, as Galaxy is out of reach here, its
    Galaxy install left out (the collections it asks for are in the base). Returns the text and the lines
    changed, so the test can show that nothing else was touched."""
    out, changed, skipping = [], [], False
    for line in original.splitlines():
        if line.startswith("FROM "):
            out.append(f"FROM {base}")
            changed.append(line)
        elif skipping or line.startswith(("COPY requirements.yml", "RUN ansible-galaxy collection install")):
            changed.append(line)
            skipping = line.endswith("\\")  # a continued RUN line
        else:
            out.append(line)
    return "\n".join(out) + "\n", changed


def test_an_operator_sdk_project_builds_on_the_base_and_runs_with_its_own_args(
    base_image: str, api: client.ApiClient, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    upstream = Path(
        subprocess.run([str(ROOT / "hack" / "upstream-testdata.sh")], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    project = tmp_path / "project"
    shutil.copytree(upstream, project)
    project.chmod(0o755)
    (project / "Dockerfile").chmod(0o644)
    text, changed = switched_dockerfile((upstream / "Dockerfile").read_text(), base_image)
    assert [c.split()[0] for c in changed] == ["FROM", "COPY", "RUN", "&&"], changed
    (project / "Dockerfile").write_text(text)
    tag = f"operator-sdk-project:{uuid.uuid4().hex[:8]}"
    engine("build", "-t", tag, str(project), timeout=600)
    try:
        listed = engine("run", "--rm", "--read-only", "--network", "none", tag, "check").stdout
        assert "Memcached.v1alpha1.cache.example.com: playbook /opt/ansible/playbooks/memcached.yml" in listed
        assert "Secret.v1: role /opt/ansible/roles/secret" in listed

        # Its Deployment's args and env as its config/default renders them, unchanged.
        rendered = subprocess.run(
            ["kubectl", "kustomize", str(project / "config" / "default")], capture_output=True, text=True, check=True
        ).stdout
        deployment = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert {"--metrics-secure", "--metrics-require-rbac", "--leader-elect"} <= set(container["args"])
        subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig, "apply", "-k", str(project / "config" / "crd")],
            capture_output=True,
            check=True,
        )
        # The bed's admin kubeconfig, certificates inline, readable by uid 1001: this test is about the image
        # and the project's args; the operator's own RBAC is test_the_image_converges_a_foo_*'s.
        flat = tmp_path / "kubeconfig"
        flat.write_text(
            subprocess.run(
                ["kubectl", "--kubeconfig", kubeconfig, "config", "view", "--raw", "--flatten"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        flat.chmod(0o644)
        health, metrics = free_port(), free_port()
        name = f"hyop-sdk-{uuid.uuid4().hex[:8]}"
        env = [f"--env={e['name']}={e['value']}" for e in container.get("env", []) if "value" in e]
        engine(
            "run", "--detach", "--name", name, "--network", "host", *env,
            "--env", "KUBECONFIG=/kubeconfig", "--env", f"WATCH_NAMESPACE={namespace}",
            "--volume", f"{flat}:/kubeconfig:ro", tag, *container["args"],
            f"--health-probe-bind-address=127.0.0.1:{health}", f"--metrics-bind-address=127.0.0.1:{metrics}",
            "--user-metrics-bind-address=127.0.0.1:0",
        )  # fmt: skip
        try:
            sample = yaml.safe_load((project / "config" / "samples" / "cache_v1alpha1_memcached.yaml").read_text())
            custom = client.CustomObjectsApi(api)
            custom.create_namespaced_custom_object("cache.example.com", "v1alpha1", namespace, "memcacheds", sample)

            def converged() -> bool:
                return successful(
                    custom.get_namespaced_custom_object(
                        "cache.example.com", "v1alpha1", namespace, "memcacheds", sample["metadata"]["name"]
                    )
                )

            wait_until(converged, 180, "the operator-sdk project's Memcached converged from its image")
            assert https_get(metrics, "/metrics")[0] == 401
        finally:
            engine("rm", "--force", name, check=False)
            flat.unlink()
    finally:
        engine("rmi", "--force", tag, check=False)
