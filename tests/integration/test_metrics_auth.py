"""Secure metrics for real: HTTPS, and /metrics only for callers the API server vouches for.

The operator runs as deploy/ runs it: on its ServiceAccount's token, with deploy/'s RBAC applied (which must
let it create TokenReviews and SubjectAccessReviews), `--metrics-secure --metrics-require-rbac`, watching the
namespace the manager Deployment watches. Callers
are ServiceAccounts of the test's namespace: one bound to deploy/rbac's metrics-reader ClusterRole, one not.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.integration.conftest import ROOT, https_get, service_account_token

pytestmark = pytest.mark.integration
SA_NAMESPACE, SA_NAME = "hybrid-operator-system", "hybrid-operator"
READER_ROLE = "hybrid-operator-metrics-reader"


RBAC_KINDS = ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


@dataclass
class Install:
    kubeconfig: Path  # the operator's ServiceAccount token
    watched: str  # the namespace the manager Deployment watches, where its Role grants rights


@pytest.fixture
def installed(api: client.ApiClient, kubeconfig: str, crds: None, tmp_path: Path) -> Install:
    """The RBAC of `kubectl apply -k deploy/` applied, and a kubeconfig with the operator's token."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip('kubectl not on PATH (eval "$(hack/local-cluster.sh env)")')
    rendered = subprocess.run([kubectl, "kustomize", str(ROOT / "deploy")], check=True, capture_output=True, text=True)
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig, "apply", "-f", "-"],
        input=yaml.safe_dump_all([d for d in docs if d["kind"] in RBAC_KINDS]),
        check=True,
        capture_output=True,
        text=True,
    )
    manager = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    watch = next((e.get("value", "") for e in manager.get("env", []) if e["name"] == "WATCH_NAMESPACE"), "")
    cluster = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]
    path = tmp_path / "operator.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "sa", "user": {"token": service_account_token(api, SA_NAMESPACE, SA_NAME)}}],
                "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    path.chmod(0o600)
    return Install(path, watch.split(",")[0])


def scrapers(api: client.ApiClient, namespace: str) -> tuple[str, str]:
    """Tokens of two ServiceAccounts: one bound to the metrics-reader ClusterRole, one without it."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    for name in ("prometheus", "stranger"):
        core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    # The stranger holds the role only through a RoleBinding, which cannot grant a non-resource URL.
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "metrics-reader-in-namespace-only"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": "stranger", "namespace": namespace}],
        },
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": f"{namespace}-metrics-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
        }
    )
    return service_account_token(api, namespace, "prometheus"), service_account_token(api, namespace, "stranger")


def test_metrics_answer_only_to_authorised_callers(
    operator, api: client.ApiClient, namespace: str, installed: Install, tmp_path: Path
) -> None:
    reader, stranger = scrapers(api, namespace)
    watches = tmp_path / "watches.yaml"
    watches.write_text(
        f"- {{version: v1alpha1, group: samplecontroller.k8s.io, kind: Foo, role: {ROOT / 'roles/foo'}}}\n"
    )
    try:
        op = operator(
            watches,
            "--metrics-secure",
            "--metrics-require-rbac",
            # Where deploy/ grants the operator rights (an empty WATCH_NAMESPACE needs the cluster-wide overlay).
            env={"KUBECONFIG": str(installed.kubeconfig), "WATCH_NAMESPACE": installed.watched},
        )
        assert op.http(op.metrics_port, "/metrics")[0] == 0  # plain HTTP gets no answer at all
        assert https_get(op.metrics_port, "/metrics")[0] == 401
        assert https_get(op.metrics_port, "/metrics", "not-a-token")[0] == 401
        status, body = https_get(op.metrics_port, "/metrics", stranger)
        assert status == 403, body
        assert f"system:serviceaccount:{namespace}:stranger" in body
        status, body = https_get(op.metrics_port, "/metrics", reader)
        assert status == 200, body
        assert "ansible_operator_build_info" in body
        assert https_get(op.metrics_port, "/metrics", reader)[0] == 200  # the cached answer
        assert "forbidden" not in op.log().lower()  # the operator's own TokenReviews were allowed
    finally:
        client.RbacAuthorizationV1Api(api).delete_cluster_role_binding(f"{namespace}-metrics-reader")
