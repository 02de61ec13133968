"""Integration fixtures: API clients, a namespace per test, CRDs, and the operator as a real process.

Everything here is real: the local (or user's) API server, the ``hybrid-operator`` console script in a
subprocess, ansible-runner and the Ansible collections from the project's virtualenv. The ``operator``
factory starts the operator on a watches.yaml, scoped to the test's namespace with WATCH_NAMESPACE, and
waits for /readyz.

Tests run side by side on one bed. hack/test.sh runs the integration and cloud tests not marked
``serial`` with pytest-xdist (``-n 4 --dist loadgroup``), then the ``serial`` ones one at a time. So that
a new test fits:

- Each worker is its own pytest session: session fixtures (``api``, ``crds``) run once per worker and must
  be idempotent (``install_crds`` is: CRDs are cluster-scoped, every worker installs the same ones).
- A test file is one unit of work: its tests run one after the other on one worker, and its module
  fixtures are made once. Files that share something fixed on the cluster (a namespace of their own name,
  a cluster-wide object, deploy/'s RBAC) name one group in ``GROUPS`` of tests/conftest.py: ``deploy``
  (test_rbac.py, test_metrics_auth.py), ``cloud`` (the OpenStack tests), ``memcached`` (operator-sdk's
  memcached operator: test_upstream_compat.py, test_docs_pages.py).
- Everything else a test makes is its own: the ``namespace`` fixture (random name), names derived from it
  for cluster-scoped objects, ports from ``free_port`` (a block per worker), files under ``tmp_path``
  (deeper on a worker: a Unix socket's path may not fit, see test_private_state.py's ``private_tmpdir``).
- A test that stops or restarts the bed's components (the ``bed`` fixture refuses to run on a worker), or
  whose verdict is a time bound that load on the shared machine could break, is marked ``serial``.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, utils
from kubernetes.client.rest import ApiException

from tests.helpers import condition as condition
from tests.helpers import successful as successful
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def api(kubeconfig: str) -> client.ApiClient:
    return config.new_client_from_config(config_file=kubeconfig)


@pytest.fixture(scope="session")
def crds(api: client.ApiClient) -> None:
    """Install the test CRDs and the shipped ones, and wait until they are served."""
    files = sorted((FIXTURES / "crds").glob("*.yaml")) + sorted((ROOT / "deploy" / "crds").glob("*.yaml"))
    install_crds(api, files, replace=True)


def install_crds(api: client.ApiClient, files: list[Path], *, replace: bool) -> None:
    """Create the CRDs in ``files`` (one that exists is replaced with ``replace``, else left as it is) and
    wait until each is established."""
    ext = client.ApiextensionsV1Api(api)
    names = []
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            names.append(doc["metadata"]["name"])
            try:
                ext.create_custom_resource_definition(doc)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                if replace:
                    wait_until(lambda d=doc: _replaced(ext, d), 30, f"CRD {doc['metadata']['name']} replaced")
    for name in names:
        wait_until(lambda n=name: _established(ext, n), 60, f"CRD {name} established")


def upstream_project(api: client.ApiClient) -> Path:
    """operator-sdk's memcached-molecule-operator (``hack/upstream-testdata.sh``), its CRDs installed."""
    out = subprocess.run(
        [str(ROOT / "hack" / "upstream-testdata.sh")], capture_output=True, text=True, check=False, timeout=600
    )
    assert out.returncode == 0, out.stderr
    path = Path(out.stdout.strip().splitlines()[-1])
    install_crds(api, sorted((path / "config" / "crd" / "bases").glob("*.yaml")), replace=False)
    return path


def _replaced(ext: client.ApiextensionsV1Api, doc: dict[str, Any]) -> bool:
    """Replace a CRD with ``doc``: False when another worker replaced it between our read and write (409),
    to be tried again. Replacing a CRD with the same content changes nothing the API server serves, so
    every worker's session may do it."""
    current = ext.read_custom_resource_definition(doc["metadata"]["name"])
    body = {**doc, "metadata": {**doc["metadata"], "resourceVersion": current.metadata.resource_version}}
    try:
        ext.replace_custom_resource_definition(doc["metadata"]["name"], body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        return False
    return True


def _established(ext: client.ApiextensionsV1Api, name: str) -> bool:
    crd = ext.read_custom_resource_definition(name)
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


@pytest.fixture
def namespace(api: client.ApiClient) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture(autouse=True)
def _real_node_only(request: pytest.FixtureRequest) -> None:
    """Tests marked ``realnode`` run real containers (exec, logs): skipped on a bed of kwok's fake nodes."""
    if request.node.get_closest_marker("realnode") is None:
        return
    nodes = client.CoreV1Api(request.getfixturevalue("api")).list_node().items
    if not any((n.metadata.annotations or {}).get("kwok.x-k8s.io/node") != "fake" for n in nodes):
        pytest.skip("needs a real node: a bed started with hack/local-cluster.sh up --real-node")


# Ports the tests choose for their servers come from a block of this pytest-xdist worker's own, below the
# kernel's ephemeral range (32768 and up on Linux): no other worker chooses the same port between our
# check that it is free and the operator binding it, and no outgoing connection is given it meanwhile.
PORT_BLOCK = 300
_ports: dict[str, int] = {}


def worker_index() -> int:
    """This pytest-xdist worker's number (gw3 -> 3); 0 outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker[2:]) if worker[2:].isdigit() else 0


def free_port() -> int:
    """A loopback port free now, from this worker's block; the blocks of workers 0-31 fill 20000-29599."""
    start = 20000 + worker_index() * PORT_BLOCK
    for _ in range(PORT_BLOCK):
        port = start + _ports.get("next", 0)
        _ports["next"] = (_ports.get("next", 0) + 1) % PORT_BLOCK
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {start}-{start + PORT_BLOCK - 1}")


@dataclass
class OperatorProcess:
    proc: subprocess.Popen[bytes]
    log_path: Path
    health_port: int
    metrics_port: int
    artifacts: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def http(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def ready(self) -> bool:
        return self.http(self.health_port, "/readyz")[0] == 200

    def metrics(self) -> str:
        return self.http(self.metrics_port, "/metrics")[1]

    def metrics_with(self, line_start: str, timeout: float = 15) -> str:
        """/metrics once it carries `line_start`: a run's result is counted just after its status is written."""

        def carrying() -> str:
            text = self.metrics()
            return text if line_start in text else ""

        return wait_until(carrying, timeout, line_start)

    def terminate(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def start_operator(
    kubeconfig: str,
    watches: Path,
    workdir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    default_artifacts: bool = False,  # no --runner-artifacts-dir: the operator's default
    cwd: Path = ROOT,
    wrapper: tuple[str, ...] = (),  # a command that execs the operator's argv it is given (a cgroup's, say)
) -> OperatorProcess:
    """The operator as a real process on a watches.yaml, its log and artifacts under workdir."""
    health, metrics = free_port(), free_port()
    artifacts = workdir / "artifacts"
    log_path = workdir / "operator.log"
    workdir.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "KUBECONFIG": kubeconfig, **(env or {})}
    cmd = [
        *wrapper,
        str(Path(sys.executable).parent / "hybrid-operator"),
        "run",
        "--watches-file",
        str(watches),
        "--health-probe-bind-address",
        f"127.0.0.1:{health}",
        "--metrics-bind-address",
        f"127.0.0.1:{metrics}",
        # Role metrics on a port of the kernel's choosing: operators side by side never share 5050.
        "--user-metrics-bind-address",
        "127.0.0.1:0",
        *([] if default_artifacts else ["--runner-artifacts-dir", str(artifacts)]),
        "--ansible-verbosity",
        "0",
        *args,
    ]
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=cwd, start_new_session=True
        )
    handle = OperatorProcess(proc, log_path, health, metrics, artifacts)
    if wait_ready:
        wait_until(lambda: handle.ready() or handle.proc.poll() is not None, 90, "operator ready")
        if handle.proc.poll() is not None:
            raise AssertionError(f"operator exited early:\n{handle.log()}")
    return handle


def stop_operator(handle: OperatorProcess) -> None:
    try:
        handle.terminate(30)
    except subprocess.TimeoutExpired:
        handle.kill()


@pytest.fixture
def operator(kubeconfig: str, crds: None, namespace: str, tmp_path: Path) -> Iterator[Callable[..., OperatorProcess]]:
    """Starts the operator scoped to the test's namespace (WATCH_NAMESPACE), so tests can run side by side."""
    started: list[OperatorProcess] = []

    def start(watches: Path, *args: str, env: dict[str, str] | None = None, **options: Any) -> OperatorProcess:
        index = len(started)
        full_env = {
            "WATCH_NAMESPACE": namespace,
            "DEMO_LOCK_DIR": str(tmp_path / "locks"),  # shared by the test's operators
            "DEMO_RECONCILE_PERIOD": "10h",
            **(env or {}),
        }
        handle = start_operator(kubeconfig, watches, tmp_path / f"operator-{index}", *args, env=full_env, **options)
        started.append(handle)
        return handle

    yield start
    for handle in started:
        stop_operator(handle)


class Objects:
    """Small helpers over the dynamic parts of the API the tests touch."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)

    def create(self, group: str, version: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.custom.create_namespaced_custom_object(group, version, self.namespace, plural, body)

    def get(self, group: str, version: str, plural: str, name: str) -> dict[str, Any] | None:
        try:
            return self.custom.get_namespaced_custom_object(group, version, self.namespace, plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def patch(self, group: str, version: str, plural: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.custom.patch_namespaced_custom_object(group, version, self.namespace, plural, name, body)

    def successful(
        self, group: str, version: str, plural: str, name: str, *, generation: int | None = None
    ) -> dict[str, Any] | None:
        """The resource if it is Successful (for ``generation``, if given), else None."""
        obj = self.get(group, version, plural, name)
        return obj if obj is not None and successful(obj, generation) else None

    def wait_successful(
        self,
        group: str,
        version: str,
        plural: str,
        name: str,
        timeout: float = 90,
        *,
        generation: int | None = None,
        operator: OperatorProcess | None = None,
    ) -> dict[str, Any]:
        """Wait until the resource is Successful (for ``generation``, if given) and return it. With
        ``operator``, a Failure=True ends the wait at once, with its message and that operator's log."""

        def done() -> dict[str, Any] | None:
            obj = self.get(group, version, plural, name)
            failure = condition(obj, "Failure")
            if operator is not None and failure and failure.get("status") == "True":
                raise AssertionError(f"{name} failed: {failure.get('message')}\n{operator.log()[-4000:]}")
            return obj if obj is not None and successful(obj, generation) else None

        return wait_until(done, timeout, f"{plural} {name} Successful")

    def delete(self, group: str, version: str, plural: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(group, version, self.namespace, plural, name)

    def events(self, name: str) -> list[Any]:
        items = self.core.list_namespaced_event(self.namespace).items
        return [e for e in items if e.involved_object.name == name]

    def apply_file(self, path: Path) -> None:
        utils.create_from_yaml(self.api, str(path), namespace=self.namespace)


@pytest.fixture
def foo_watches(tmp_path: Path) -> Path:
    """The shipped watches.yaml, Foo entry only (the VirtualMachine entry needs a cloud)."""
    path = tmp_path / "watches.yaml"
    path.write_text(
        f"- version: v1alpha1\n  group: samplecontroller.k8s.io\n  kind: Foo\n  role: {ROOT / 'roles' / 'foo'}\n"
        "  watchDependentStatusChanges: true\n"
    )
    return path


@pytest.fixture
def objects(api: client.ApiClient, namespace: str) -> Objects:
    return Objects(api, namespace)


def service_account_token(api: client.ApiClient, namespace: str, name: str, seconds: int = 3600) -> str:
    """A bound token for a ServiceAccount (TokenRequest), as the kubelet mounts one into a pod."""
    request = {"spec": {"expirationSeconds": seconds}}
    return str(client.CoreV1Api(api).create_namespaced_service_account_token(name, namespace, request).status.token)


def https_get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    """GET over HTTPS on loopback without verifying the certificate (the metrics server's is self-signed)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
