"""deploy/rbac for real: the operator runs on its ServiceAccount's token, and that token can do what the two
operators need and nothing more (checked with SubjectAccessReviews, what `kubectl auth can-i --as` asks)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.integration.conftest import ROOT, Objects, condition, wait_until

pytestmark = pytest.mark.integration
SA_NAMESPACE, SA_NAME = "hybrid-operator-system", "hybrid-operator"
USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"


@pytest.fixture(scope="module")
def rbac(kubeconfig: str) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip('kubectl not on PATH (eval "$(hack/local-cluster.sh env)")')
    for args in (
        ["apply", "-f", str(ROOT / "deploy" / "manager" / "namespace.yaml")],
        ["apply", "-k", str(ROOT / "deploy" / "rbac")],
    ):
        subprocess.run([kubectl, "--kubeconfig", kubeconfig, *args], check=True, capture_output=True)


@pytest.fixture
def sa_kubeconfig(rbac: None, api: client.ApiClient, kubeconfig: str, tmp_path: Path) -> Path:
    """A kubeconfig that authenticates as the operator's ServiceAccount (a short-lived bound token)."""
    request = {"spec": {"expirationSeconds": 3600}}
    token = client.CoreV1Api(api).create_namespaced_service_account_token(SA_NAME, SA_NAMESPACE, request).status.token
    admin = yaml.safe_load(Path(kubeconfig).read_text())
    cluster = admin["clusters"][0]["cluster"]
    path = tmp_path / "sa.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    path.chmod(0o600)
    return path


def can(api: client.ApiClient, verb: str, resource: str, namespace: str = "", group: str = "", sub: str = "") -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": USER,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{SA_NAMESPACE}", "system:authenticated"],
            "resourceAttributes": {
                "verb": verb,
                "resource": resource,
                "namespace": namespace,
                "group": group,
                "subresource": sub,
            },
        },
    }
    return bool(client.AuthorizationV1Api(api).create_subject_access_review(review).status.allowed)


def test_the_service_account_gets_what_it_needs_and_no_more(rbac: None, api: client.ApiClient) -> None:
    allowed = [
        ("watch", "foos", "team-a", "samplecontroller.k8s.io", ""),
        ("patch", "foos", "team-a", "samplecontroller.k8s.io", "status"),
        ("patch", "virtualmachines", "team-a", "cloudnative.tw", "status"),
        ("create", "deployments", "team-a", "apps", ""),
        ("get", "secrets", "team-a", "", ""),  # the VirtualMachine role reads the Secret its CR names
        ("create", "events", "team-a", "", ""),
        ("update", "leases", SA_NAMESPACE, "coordination.k8s.io", ""),
    ]
    denied = [
        ("list", "secrets", "team-a", "", ""),  # cannot enumerate, so cannot find Secrets it was not told of
        ("watch", "secrets", "", "", ""),
        ("create", "secrets", "team-a", "", ""),
        ("delete", "secrets", "kube-system", "", ""),
        ("get", "configmaps", "kube-system", "", ""),
        ("create", "pods", "team-a", "", ""),
        ("delete", "namespaces", "", "", ""),
        ("update", "leases", "kube-system", "coordination.k8s.io", ""),
        ("escalate", "clusterroles", "", "rbac.authorization.k8s.io", ""),
        ("delete", "foos", "team-a", "samplecontroller.k8s.io", ""),
    ]
    assert [a for a in allowed if not can(api, *a)] == []
    assert [d for d in denied if can(api, *d)] == []


def test_the_operator_works_on_its_service_account_token(
    operator, objects: Objects, sa_kubeconfig: Path, tmp_path: Path
) -> None:
    watches = tmp_path / "watches.yaml"
    watches.write_text(
        f"- version: v1alpha1\n  group: samplecontroller.k8s.io\n  kind: Foo\n  role: {ROOT / 'roles' / 'foo'}\n"
    )
    op = operator(
        watches,
        "--leader-elect",
        "--leader-election-id",
        f"rbac-{objects.namespace}",
        "--leader-election-namespace",
        SA_NAMESPACE,
        env={"KUBECONFIG": str(sa_kubeconfig)},
    )
    objects.create(
        "samplecontroller.k8s.io",
        "v1alpha1",
        "foos",
        {
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": "least"},
            "spec": {"deploymentName": "least-web", "replicas": 1},
        },
    )

    def converged() -> bool:
        obj = objects.get("samplecontroller.k8s.io", "v1alpha1", "foos", "least")
        return (condition(obj, "Successful") or {}).get("status") == "True" and (obj or {}).get("status", {}).get(
            "availableReplicas"
        ) == 1

    wait_until(converged, 90, "the Foo converged by the operator on its ServiceAccount")
    assert " 403" not in op.log() and "forbidden" not in op.log().lower()
