"""deploy/ for real: the RBAC the default install ships, applied to the API server, grants the operator's
ServiceAccount what the two operators need in the namespace it watches and nothing elsewhere (checked with
SubjectAccessReviews, what `kubectl auth can-i --as` asks, and with requests made on the ServiceAccount's
own token), and the operator converges on that token alone.

The manifests are rendered with `kubectl kustomize` exactly as `kubectl apply -k` would install them; the
overlays (overlays/namespaces/, overlays/cluster-wide/) are checked as renderings: each grants rights in
exactly the namespaces its manager watches.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.integration.conftest import ROOT, Objects, condition, successful, wait_until
from tests.unit.test_deploy_limits import assert_limits_hold, flags, memory_needed, tmp_volume

pytestmark = pytest.mark.integration
DEPLOY = ROOT / "deploy"
SA_NAMESPACE, SA_NAME = "hybrid-operator-system", "hybrid-operator"
USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"
RBAC_KINDS = ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
# A namespace nobody told the operator to watch (it need not exist for a SubjectAccessReview).
ELSEWHERE = "another-tenant"


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip('kubectl not on PATH (eval "$(hack/local-cluster.sh env)")')
    return path


def render(directory: Path) -> list[dict[str, Any]]:
    out = subprocess.run([kubectl(), "kustomize", str(directory)], check=True, capture_output=True, text=True)
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def manager_env(docs: list[dict[str, Any]], name: str) -> str | None:
    for doc in docs:
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "hybrid-operator":
            for container in doc["spec"]["template"]["spec"]["containers"]:
                for env in container.get("env") or []:
                    if env["name"] == name:
                        return str(env.get("value", ""))
    return None


def watched(docs: list[dict[str, Any]]) -> list[str]:
    return [ns.strip() for ns in (manager_env(docs, "WATCH_NAMESPACE") or "").split(",") if ns.strip()]


def grants(docs: list[dict[str, Any]]) -> dict[str, list[list[dict[str, Any]]]]:
    """namespace ("" = every namespace) -> the rule lists bound there to the operator's ServiceAccount
    (leaving out rules that only create reviews, see reviews_only)."""
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}
    out: dict[str, list[list[dict[str, Any]]]] = {}
    for doc in docs:
        if doc["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = doc.get("subjects") or []
        if not any(
            s["kind"] == "ServiceAccount" and (s["namespace"], s["name"]) == (SA_NAMESPACE, SA_NAME) for s in subjects
        ):
            continue
        namespace = doc["metadata"].get("namespace", "") if doc["kind"] == "RoleBinding" else ""
        ref = doc["roleRef"]
        role = roles[(ref["kind"], namespace if ref["kind"] == "Role" else "", ref["name"])]
        rules = [rule for rule in role["rules"] if not reviews_only(rule)]
        if rules:
            out.setdefault(namespace, []).append(rules)
    return out


def reviews_only(rule: dict[str, Any]) -> bool:
    """A rule that only creates TokenReviews and SubjectAccessReviews: what a metrics endpoint needs to
    authenticate and authorise its scrapers. It is cluster-scoped by nature, reads nothing and changes
    nothing, so any install may have it."""
    return (
        set(rule.get("apiGroups") or []) <= {"authentication.k8s.io", "authorization.k8s.io"}
        and set(rule.get("resources") or []) <= {"tokenreviews", "subjectaccessreviews"}
        and rule.get("verbs") == ["create"]
        and not rule.get("nonResourceURLs")
    )


@pytest.fixture(scope="module")
def default_install(kubeconfig: str, crds: None, api: client.ApiClient) -> list[dict[str, Any]]:
    """The RBAC of `kubectl apply -k deploy/` (namespaces, ServiceAccount, Roles, bindings) applied to the
    cluster; the manager Deployment is left out (the tests run the operator here, on the same token)."""
    docs = render(DEPLOY)
    rbac = [doc for doc in docs if doc["kind"] in RBAC_KINDS]
    # Earlier versions of deploy/ bound a ClusterRole of this name: on a reused cluster it would still
    # grant everything everywhere and the reviews below would judge it instead of these manifests.
    try:
        client.RbacAuthorizationV1Api(api).delete_cluster_role_binding("hybrid-operator-manager")
    except ApiException as exc:
        if exc.status != 404:
            raise
    subprocess.run(
        [kubectl(), "--kubeconfig", kubeconfig, "apply", "-f", "-"],
        input=yaml.safe_dump_all(rbac),
        text=True,
        check=True,
        capture_output=True,
    )
    return docs


@pytest.fixture(scope="module")
def tenant(default_install: list[dict[str, Any]]) -> str:
    namespaces = watched(default_install)
    assert len(namespaces) == 1, f"the default install watches one namespace, got {namespaces}"
    return namespaces[0]


@pytest.fixture
def sa_kubeconfig(
    default_install: list[dict[str, Any]], api: client.ApiClient, kubeconfig: str, tmp_path: Path
) -> Path:
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


# -- the manifests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("directory", ["", "overlays/namespaces", "overlays/cluster-wide", "overlays/memory-tmp"])
def test_each_install_grants_rights_exactly_where_its_manager_watches(directory: str) -> None:
    docs = render(DEPLOY / directory)
    namespaces = watched(docs)
    bound = grants(docs)
    manager_rules = yaml.safe_load((DEPLOY / "watch" / "role.yaml").read_text())["rules"]
    assert bound.pop(SA_NAMESPACE) == [
        yaml.safe_load((DEPLOY / "rbac" / "leader_election_role.yaml").read_text())["rules"]
    ]
    if namespaces:
        assert sorted(bound) == sorted(namespaces), "a Role and RoleBinding in each watched namespace, no other"
    else:
        assert list(bound) == [""], "watching every namespace needs the ClusterRoleBinding"
    # The same rules wherever they apply: the cluster-wide ClusterRole is the per-namespace Role, widened.
    assert all(rules == [manager_rules] for rules in bound.values())


def test_the_sharded_overlay_runs_three_replicas_that_may_keep_a_ring_of_leases() -> None:
    docs = render(DEPLOY / "overlays" / "sharded")
    manager = next(d for d in docs if d["kind"] == "Deployment")
    container = manager["spec"]["template"]["spec"]["containers"][0]
    assert manager["spec"]["replicas"] == 3
    assert "--sharding" in container["args"] and "--leader-elect" not in container["args"]
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]
    bound = grants(docs)
    own = [rule for rules in bound.pop(SA_NAMESPACE) for rule in rules]
    assert all(rule["resources"] == ["leases"] for rule in own), "nothing but Leases in its own namespace"
    verbs = {verb for rule in own for verb in rule["verbs"]}
    assert verbs == {"get", "list", "watch", "create", "update", "delete"}
    assert sorted(bound) == sorted(watched(docs)), "the watched namespaces' rights are the default's"


def test_the_memory_tmp_overlay_keeps_tmp_in_memory_within_the_pods_limits() -> None:
    default, docs = render(DEPLOY), render(DEPLOY / "overlays" / "memory-tmp")
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    default_pod = next(d for d in default if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert tmp_volume(pod)["medium"] == "Memory"
    assert memory_needed(pod) > memory_needed(default_pod), "the volume's size is added to the pod's memory"
    assert_limits_hold(pod)
    assert flags(pod).max_artifacts_size < flags(default_pod).max_artifacts_size
    # Nothing else changes: the same flags but the budget, the same environment, mounts and probes.
    assert [a for a in pod["containers"][0]["args"] if not a.startswith("--max-artifacts-size")] == [
        a for a in default_pod["containers"][0]["args"] if not a.startswith("--max-artifacts-size")
    ]
    for key in ("env", "volumeMounts", "livenessProbe", "readinessProbe", "securityContext"):
        assert pod["containers"][0].get(key) == default_pod["containers"][0].get(key), key


def test_the_default_install_is_namespaced(default_install: list[dict[str, Any]], tenant: str) -> None:
    assert "" not in grants(default_install), "nothing cluster-wide"
    namespace = next(d for d in default_install if d["kind"] == "Namespace" and d["metadata"]["name"] == tenant)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    samples = render(DEPLOY / "samples")
    assert {d["metadata"]["namespace"] for d in samples} == {tenant}, "the samples land where the operator watches"


# -- the cluster: SubjectAccessReviews -----------------------------------------------------------------


def test_in_the_watched_namespace_the_service_account_gets_what_both_operators_need(
    api: client.ApiClient, tenant: str
) -> None:
    allowed = [
        ("watch", "foos", tenant, "samplecontroller.k8s.io", ""),
        ("patch", "foos", tenant, "samplecontroller.k8s.io", "status"),
        ("update", "foos", tenant, "samplecontroller.k8s.io", "finalizers"),
        ("create", "deployments", tenant, "apps", ""),
        ("delete", "deployments", tenant, "apps", ""),
        ("watch", "deployments", tenant, "apps", ""),
        # The VirtualMachine path: its credentials Secret, its finalizer, its status, its Events.
        ("watch", "virtualmachines", tenant, "cloudnative.tw", ""),
        ("patch", "virtualmachines", tenant, "cloudnative.tw", ""),
        ("patch", "virtualmachines", tenant, "cloudnative.tw", "status"),
        ("update", "virtualmachines", tenant, "cloudnative.tw", "finalizers"),
        ("get", "secrets", tenant, "", ""),
        ("create", "events", tenant, "", ""),
        ("patch", "events", tenant, "", ""),
        # Leader election, in the operator's own namespace.
        ("get", "leases", SA_NAMESPACE, "coordination.k8s.io", ""),
        ("create", "leases", SA_NAMESPACE, "coordination.k8s.io", ""),
        ("update", "leases", SA_NAMESPACE, "coordination.k8s.io", ""),
    ]
    assert [a for a in allowed if not can(api, *a)] == []


def test_outside_the_watched_namespace_the_service_account_may_do_nothing_that_matters(
    api: client.ApiClient, tenant: str
) -> None:
    denied = []
    # Every namespace but the watched one, and requests across all namespaces ("").
    for ns in ("kube-system", "default", SA_NAMESPACE, ELSEWHERE, ""):
        denied += [
            ("create", "deployments", ns, "apps", ""),
            ("patch", "deployments", ns, "apps", ""),
            ("get", "secrets", ns, "", ""),
            ("list", "foos", ns, "samplecontroller.k8s.io", ""),
            ("patch", "virtualmachines", ns, "cloudnative.tw", "status"),
            ("create", "events", ns, "", ""),
        ]
    denied += [
        ("update", "leases", "kube-system", "coordination.k8s.io", ""),
        ("create", "leases", tenant, "coordination.k8s.io", ""),
    ]
    assert [d for d in denied if can(api, *d)] == []


def test_even_in_the_watched_namespace_secrets_are_read_by_name_only_and_nothing_escalates(
    api: client.ApiClient, tenant: str
) -> None:
    rbac = "rbac.authorization.k8s.io"
    denied = [
        # Secrets: no enumeration (so only the Secrets VirtualMachines name are read), no writes.
        ("list", "secrets", tenant, "", ""),
        ("watch", "secrets", tenant, "", ""),
        ("create", "secrets", tenant, "", ""),
        ("update", "secrets", tenant, "", ""),
        # No pods of its own, no way into other pods, no tokens of other ServiceAccounts.
        ("create", "pods", tenant, "", ""),
        ("create", "pods", tenant, "", "exec"),
        ("create", "serviceaccounts", tenant, "", "token"),
        ("delete", "foos", tenant, "samplecontroller.k8s.io", ""),
        # No RBAC of its own making, no escalate, bind or impersonate, anywhere.
        ("create", "roles", tenant, rbac, ""),
        ("create", "rolebindings", tenant, rbac, ""),
        ("escalate", "roles", tenant, rbac, ""),
        ("bind", "roles", tenant, rbac, ""),
        ("create", "clusterrolebindings", "", rbac, ""),
        ("escalate", "clusterroles", "", rbac, ""),
        ("bind", "clusterroles", "", rbac, ""),
        ("impersonate", "users", "", "", ""),
        ("impersonate", "groups", "", "", ""),
        ("impersonate", "serviceaccounts", tenant, "", ""),
        ("impersonate", "serviceaccounts", "kube-system", "", ""),
        # Nothing cluster-scoped: not even CRDs (kinds are found through discovery, open to everyone).
        ("get", "customresourcedefinitions", "", "apiextensions.k8s.io", ""),
        ("patch", "nodes", "", "", ""),
        ("delete", "namespaces", "", "", ""),
        ("create", "certificatesigningrequests", "", "certificates.k8s.io", ""),
    ]
    assert [d for d in denied if can(api, *d)] == []


# -- the cluster: requests on the ServiceAccount's own token -------------------------------------------


def privileged_deployment(name: str) -> dict[str, Any]:
    """What the security review created (dry run) in kube-system: host root, privileged, host network."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "hostNetwork": True,
                    "hostPID": True,
                    "containers": [
                        {
                            "name": "root",
                            "image": "busybox",
                            "securityContext": {"privileged": True},
                            "volumeMounts": [{"name": "host", "mountPath": "/host"}],
                        }
                    ],
                    "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
                },
            },
        },
    }


@pytest.fixture
def sa_api(sa_kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(sa_kubeconfig))


def test_a_privileged_host_root_deployment_is_refused_outside_and_gets_no_pods_inside(
    sa_api: client.ApiClient, api: client.ApiClient, tenant: str
) -> None:
    apps = client.AppsV1Api(sa_api)
    for ns in ("kube-system", "default", ELSEWHERE):
        with pytest.raises(ApiException) as refused:
            apps.create_namespaced_deployment(ns, privileged_deployment("takeover"), dry_run="All")
        assert refused.value.status == 403, f"{ns}: {refused.value.reason}"
    # In the watched namespace the operator may create Deployments (that is its job), but the namespace's
    # Pod Security level refuses their pods.
    name = f"takeover-{uuid.uuid4().hex[:6]}"
    apps.create_namespaced_deployment(tenant, privileged_deployment(name))
    try:

        def refused_by_pod_security() -> str:
            for rs in client.AppsV1Api(api).list_namespaced_replica_set(tenant, label_selector=f"app={name}").items:
                for cond in rs.status.conditions or []:
                    if cond.type == "ReplicaFailure" and "violates PodSecurity" in (cond.message or ""):
                        return str(cond.message)
            return ""

        message = wait_until(refused_by_pod_security, 60, "the ReplicaSet's pods refused by Pod Security")
        assert "privileged" in message and "hostPath" in message
        assert client.CoreV1Api(api).list_namespaced_pod(tenant, label_selector=f"app={name}").items == []
    finally:
        client.AppsV1Api(api).delete_namespaced_deployment(name, tenant, propagation_policy="Foreground")


class TrackedObjects(Objects):
    """Objects in the watched namespace, which outlives the test: what a test made there is removed after
    it, finalizers and all."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        super().__init__(api, namespace)
        self.made: list[tuple[str, str, str, str]] = []

    def create(self, group: str, version: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        self.made.append((group, version, plural, body["metadata"]["name"]))
        return super().create(group, version, plural, body)

    def remove_all(self) -> None:
        for group, version, plural, name in self.made:
            try:
                self.patch(group, version, plural, name, {"metadata": {"finalizers": None}})
                self.delete(group, version, plural, name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
def tenant_objects(api: client.ApiClient, tenant: str) -> Iterator[Objects]:
    objects = TrackedObjects(api, tenant)
    yield objects
    objects.remove_all()


def foo(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": name},
        "spec": {"deploymentName": f"{name}-web", "replicas": 1},
    }


def test_the_operator_converges_a_foo_on_its_token_and_only_where_it_watches(
    operator,
    objects: Objects,
    tenant_objects: Objects,
    tenant: str,
    sa_kubeconfig: Path,
    tmp_path: Path,
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
        env={"KUBECONFIG": str(sa_kubeconfig), "WATCH_NAMESPACE": tenant},
    )
    name = f"least-{uuid.uuid4().hex[:6]}"
    tenant_objects.create("samplecontroller.k8s.io", "v1alpha1", "foos", foo(name))
    objects.create("samplecontroller.k8s.io", "v1alpha1", "foos", foo("unwatched"))  # in another namespace

    def converged() -> bool:
        obj = tenant_objects.get("samplecontroller.k8s.io", "v1alpha1", "foos", name)
        return successful(obj) and (obj or {}).get("status", {}).get("availableReplicas") == 1

    wait_until(converged, 90, "the Foo converged by the operator on its ServiceAccount")
    deployment = tenant_objects.apps.read_namespaced_deployment(f"{name}-web", tenant)
    assert [ref.name for ref in deployment.metadata.owner_references] == [name]
    # The Foo outside the watched namespace was never touched: no status, no Deployment.
    time.sleep(2)
    assert "status" not in (objects.get("samplecontroller.k8s.io", "v1alpha1", "foos", "unwatched") or {})
    assert objects.apps.list_namespaced_deployment(objects.namespace).items == []
    assert " 403" not in op.log() and "forbidden" not in op.log().lower()


def test_the_virtualmachine_operator_reads_the_named_secret_on_its_token(
    operator,
    objects: Objects,
    tenant_objects: Objects,
    tenant: str,
    sa_kubeconfig: Path,
    tmp_path: Path,
) -> None:
    """No cloud needed: the named Secret has no clouds.yaml, which the role can only tell by reading it;
    it then writes the Failure to the status and an Event, having added its finalizer first."""
    watches = tmp_path / "watches.yaml"
    watches.write_text(
        "- version: v1alpha1\n  group: cloudnative.tw\n  kind: VirtualMachine\n"
        f"  role: {ROOT / 'roles' / 'virtualmachine'}\n"
        "  finalizer:\n    name: cloudnative.tw/finalizer\n    vars:\n      state: absent\n"
    )
    op = operator(
        watches,
        "--leader-elect",
        "--leader-election-id",
        f"rbac-vm-{objects.namespace}",
        "--leader-election-namespace",
        SA_NAMESPACE,
        env={"KUBECONFIG": str(sa_kubeconfig), "WATCH_NAMESPACE": tenant},
    )
    name = f"least-{uuid.uuid4().hex[:6]}"
    secret = f"{name}-creds"
    core = tenant_objects.core
    core.create_namespaced_secret(tenant, {"metadata": {"name": secret}, "stringData": {"not-clouds.yaml": "x"}})
    try:
        tenant_objects.create(
            "cloudnative.tw",
            "v1alpha1",
            "virtualmachines",
            {
                "apiVersion": "cloudnative.tw/v1alpha1",
                "kind": "VirtualMachine",
                "metadata": {"name": name},
                "spec": {
                    "resource": {"cpu": 1, "memory": "512Mi", "rootDisk": "1Gi"},
                    "image": "cirros",
                    "credentialsSecret": secret,
                    "cloud": "nowhere",
                },
            },
        )

        def failure() -> dict[str, Any] | None:
            return condition(tenant_objects.get("cloudnative.tw", "v1alpha1", "virtualmachines", name), "Failure")

        failed = wait_until(failure, 90, "the VirtualMachine's Failure condition")
        assert failed["reason"] == "CredentialsNotFound"
        assert f"Secret {secret} in namespace {tenant} has no key clouds.yaml" in " ".join(failed["message"].split())
        vm = tenant_objects.get("cloudnative.tw", "v1alpha1", "virtualmachines", name) or {}
        assert "cloudnative.tw/finalizer" in vm["metadata"].get("finalizers", [])
        wait_until(
            lambda: [e for e in tenant_objects.events(name) if e.reason == "CredentialsNotFound"],
            30,
            "the CredentialsNotFound Event",
        )
        assert " 403" not in op.log() and "forbidden" not in op.log().lower()
    finally:
        core.delete_namespaced_secret(secret, tenant)
