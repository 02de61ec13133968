"""The operator as a user installs it, on a real node: `kubectl apply -k deploy/` unchanged, real containers.

What kwok cannot show: the image starts under the Deployment's security context, the kubelet's probes
pass against the operator's own /healthz and /readyz, the Foo sample's nginx Deployment really runs (its
``nginx:latest`` pulled from the bed's registry), a Service in front of it answers HTTP through
kube-proxy, and ``kubectl logs`` and ``kubectl exec`` reach that pod through the API server and the
kubelet. Needs the image loaded into the node (conftest.py says how); hack/test-realnode.sh (hack/test.sh's
real-node step) runs it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import wait_until
from tests.realnode.conftest import ROOT, Kubectl, get_json

pytestmark = pytest.mark.realnode

SYSTEM = "hybrid-operator-system"
TENANT = "hybrid-operator-tenant"
FOOS = "foos.samplecontroller.k8s.io"  # named with the group: another project's Foo may be installed too
IMAGE = "docker.io/library/hybrid-operator:latest"  # deploy/manager's hybrid-operator:latest, as the kubelet names it


@pytest.fixture(scope="module")
def operator(kubectl: Kubectl, real_node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """deploy/ applied as it is, rolled out; its pod. Afterwards everything applied here is deleted again."""
    kubectl("apply", "-k", str(ROOT / "deploy"))
    try:

        def rolled_out() -> dict[str, Any] | None:
            pods = get_json(kubectl, "-n", SYSTEM, "pods", "-l", "app.kubernetes.io/name=hybrid-operator")["items"]
            for pod in pods:
                for status in pod["status"].get("containerStatuses", []):
                    if status.get("state", {}).get("waiting", {}).get("reason") in ("ErrImagePull", "ImagePullBackOff"):
                        pytest.fail(
                            f"{IMAGE} is not on the real node: hack/build-image.sh, then hack/local-cluster.sh load "
                            "build/images/hybrid-operator.oci.tar hybrid-operator:latest"
                        )
                    if status.get("ready") and not pod["metadata"].get("deletionTimestamp"):
                        return dict(pod)
            return None

        pod: dict[str, Any] = wait_until(rolled_out, 180, "the operator's pod to be Ready")
        kubectl("-n", SYSTEM, "rollout", "status", "deployment/hybrid-operator", "--timeout=60s", timeout=90)
        yield pod
    finally:
        # The Foo's pods must go with a short grace: busybox httpd, PID 1, ignores SIGTERM and would hold the
        # namespace for 30 s, and a grace period once started (the garbage collector's, when the Foo goes)
        # is not shortened by a later delete. So the Foo and its Deployment go without their dependents,
        # then the pods with a grace of 1 s, then the rest of deploy/.
        kubectl("-n", TENANT, "delete", FOOS, "--all", "--cascade=orphan", check=False)
        kubectl("-n", TENANT, "delete", "deployment,replicaset", "--all", "--cascade=orphan", check=False)
        kubectl("-n", TENANT, "delete", "service,pod", "--all", "--grace-period=1", check=False)
        kubectl("delete", "-k", str(ROOT / "deploy"), "--ignore-not-found", "--timeout=120s", timeout=150)


@pytest.fixture(scope="module")
def foo_pod(kubectl: Kubectl, operator: dict[str, Any]) -> dict[str, Any]:
    """deploy/samples/foo.yaml converged Successful; the Running pod of its Deployment."""
    kubectl("-n", TENANT, "apply", "-f", str(ROOT / "deploy" / "samples" / "foo.yaml"))
    kubectl("-n", TENANT, "wait", "--for=condition=Successful", f"{FOOS}/example-foo", "--timeout=120s", timeout=150)
    kubectl("-n", TENANT, "rollout", "status", "deployment/example-foo", "--timeout=120s", timeout=150)

    def available() -> bool:
        foo = get_json(kubectl, "-n", TENANT, f"{FOOS}/example-foo")
        return bool(foo.get("status", {}).get("availableReplicas") == 1)

    wait_until(available, 60, "the Foo to report availableReplicas 1")
    pods = get_json(kubectl, "-n", TENANT, "pods", "-l", "app=example-foo")["items"]
    running = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    assert len(running) == 1, [p["status"].get("phase") for p in pods]
    pod: dict[str, Any] = running[0]
    return pod


def test_operator_runs_on_the_real_node_and_passes_its_probes(
    kubectl: Kubectl, real_node: dict[str, Any], operator: dict[str, Any]
) -> None:
    node = real_node["metadata"]["name"]
    assert operator["spec"]["nodeName"] == node
    (status,) = operator["status"]["containerStatuses"]
    assert status["ready"] is True
    assert status["restartCount"] == 0
    assert status["image"] == IMAGE
    assert status["containerID"].startswith("containerd://")
    # The kubelet's own count of the probes it ran, read through the API server's node proxy (the kubelet
    # API on the node IP, authenticated with the API server's client certificate).
    metrics = kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics/probes").stdout
    pod = operator["metadata"]["name"]
    pattern = rf'prober_probe_total\{{[^}}]*pod="{pod}"[^}}]*probe_type="Readiness",result="successful"\}} (\d+)'
    counts = [int(n) for n in re.findall(pattern, metrics)]
    assert counts and counts[0] >= 1, f"no successful readiness probe of {pod} counted:\n{metrics[-2000:]}"


def test_foo_sample_converges_and_its_nginx_answers_through_a_service(
    kubectl: Kubectl, real_node: dict[str, Any], foo_pod: dict[str, Any]
) -> None:
    assert foo_pod["spec"]["nodeName"] == real_node["metadata"]["name"]
    (status,) = foo_pod["status"]["containerStatuses"]
    assert status["ready"] is True
    # Pulled (pull policy Always for :latest) from the bed's registry, docker.io's mirror: a digest.
    assert status["image"] == "docker.io/library/nginx:latest"
    assert status["imageID"].startswith("docker.io/library/nginx@sha256:")

    kubectl("-n", TENANT, "expose", "deployment/example-foo", "--name=example-foo", "--port=8080", "--target-port=80")
    ip = get_json(kubectl, "-n", TENANT, "service/example-foo")["spec"]["clusterIP"]
    wait_until(
        lambda: get_json(kubectl, "-n", TENANT, "endpointslices", "-l", "kubernetes.io/service-name=example-foo")[
            "items"
        ][0].get("endpoints"),
        30,
        "the Service's endpoints",
    )
    # From another pod (busybox:latest, pulled the same way) to the ClusterIP: kube-proxy's rules.
    kubectl(
        "-n", TENANT, "run", "client", "--image=busybox:latest", "--image-pull-policy=Always", "--restart=Never",
        "--", "wget", "-q", "-O-", f"http://{ip}:8080/",
    )  # fmt: skip

    def finished() -> str:
        phase: str = get_json(kubectl, "-n", TENANT, "pod/client")["status"].get("phase", "")
        return phase if phase in ("Succeeded", "Failed") else ""

    phase = wait_until(finished, 60, "the client pod to finish")
    out = kubectl("-n", TENANT, "logs", "pod/client").stdout
    assert phase == "Succeeded", out
    assert out.strip() == "<h1>fake nginx</h1>"


def test_logs_and_exec_reach_the_pod(kubectl: Kubectl, foo_pod: dict[str, Any]) -> None:
    pod = f"pod/{foo_pod['metadata']['name']}"
    # exec: a command's output and exit code, and stdin, through the API server and the kubelet.
    got = kubectl("-n", TENANT, "exec", pod, "--", "wget", "-q", "-O-", "http://127.0.0.1/").stdout
    assert got.strip() == "<h1>fake nginx</h1>"
    assert kubectl("-n", TENANT, "exec", pod, "--", "sh", "-c", "exit 3", check=False).returncode == 3
    echoed = kubectl("-n", TENANT, "exec", "-i", pod, "--", "sh", "-c", "tr a-z A-Z", stdin="through stdin\n")
    assert echoed.stdout == "THROUGH STDIN\n"

    # logs: httpd -v logs each request on stderr, the one just made from inside the pod among them.
    def logged() -> str:
        logs: str = kubectl("-n", TENANT, "logs", pod).stdout
        return logs if "127.0.0.1" in logs else ""

    logs = wait_until(logged, 30, "the request in the pod's log")
    assert re.search(r"127\.0\.0\.1\]?:\d+: response:200", logs), logs
