"""skipConvergedAtStart on a real API server: a restarted operator does not run a Foo its last run converged,
still puts back a Deployment changed while it was down, and a tenant who may update Foos (not their status)
cannot make it skip the run of a Foo they changed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.integration.conftest import Objects, OperatorProcess, wait_until
from tests.integration.test_foo import G, P, V, available, foo, replicas_of

pytestmark = pytest.mark.integration


@pytest.fixture
def skipping_watches(foo_watches: Path) -> Path:
    """The shipped Foo watch (``foo_watches``) with ``skipConvergedAtStart`` on."""
    foo_watches.write_text(foo_watches.read_text() + "  skipConvergedAtStart: true\n")
    return foo_watches


def runs_of(op: OperatorProcess, name: str) -> int:
    """Runs of the Foo ``name`` this operator process logged."""
    return sum(1 for line in op.log().splitlines() if " reconciled " in line and f"name={name}" in line)


def record_of(objects: Objects, name: str) -> dict:
    return ((objects.get(G, V, P, name) or {}).get("status") or {}).get("reconciledWith") or {}


def converge_then_stop(
    operator: Callable[..., OperatorProcess], objects: Objects, watches: Path, name: str, replicas: int
) -> dict:
    first = operator(watches)
    objects.create(G, V, P, foo(name, f"{name}-web", replicas=replicas))
    converged = wait_until(lambda: available(objects, name, replicas), 90, f"{name} available")
    # The run the Deployment's availability woke wrote the record too; wait for it to be the last word.
    wait_until(lambda: record_of(objects, name), 30, "a record")
    time.sleep(2)
    assert first.terminate() == 0
    return converged


def test_a_converged_foo_is_not_run_again_after_a_restart(operator, objects: Objects, skipping_watches) -> None:
    converge_then_stop(operator, objects, skipping_watches, "steady", 1)
    record = objects.get(G, V, P, "steady")["status"]["reconciledWith"]  # type: ignore[index]
    assert record["generation"] == 1 and record["kinds"] == ["Deployment.v1.apps"]

    second = operator(skipping_watches)
    wait_until(lambda: "1 converged objects skipped" in second.log(), 60, "the start-up check")
    objects.create(G, V, P, foo("newcomer", "newcomer-web"))
    wait_until(lambda: available(objects, "newcomer", 1), 90, "the newcomer available")
    assert runs_of(second, "newcomer") >= 1
    assert runs_of(second, "steady") == 0, second.log()
    assert "hybrid_operator_startup_checks_total" in second.metrics()


def test_a_deployment_changed_while_the_operator_was_down_is_put_back(
    operator, objects: Objects, skipping_watches
) -> None:
    converge_then_stop(operator, objects, skipping_watches, "drifted", 2)
    objects.apps.patch_namespaced_deployment_scale("drifted-web", objects.namespace, {"spec": {"replicas": 5}})

    second = operator(skipping_watches)
    wait_until(lambda: replicas_of(objects, "drifted-web") == 2, 60, "the Deployment back at 2 replicas")
    assert "changed while the operator was down" in second.log()
    assert "0 converged objects skipped, 1 drifted" in second.log()


def test_a_tenant_who_may_update_foos_cannot_forge_the_record_to_skip_a_run(
    operator, objects: Objects, skipping_watches, kubeconfig: str
) -> None:
    converge_then_stop(operator, objects, skipping_watches, "guarded", 1)
    tenant = tenant_client(objects, kubeconfig)
    custom = client.CustomObjectsApi(tenant)
    forged = dict(objects.get(G, V, P, "guarded")["status"]["reconciledWith"])  # type: ignore[index]
    forged["generation"] = 2
    # The tenant changes the spec while the operator is down, and writes a matching record wherever it may.
    custom.patch_namespaced_custom_object(
        G,
        V,
        objects.namespace,
        P,
        "guarded",
        {
            "metadata": {"annotations": {"reconciledWith": str(forged)}},
            "spec": {"replicas": 3},
            "status": {"reconciledWith": forged},
        },
    )
    with pytest.raises(ApiException) as refused:
        custom.patch_namespaced_custom_object_status(
            G, V, objects.namespace, P, "guarded", {"status": {"reconciledWith": forged}}
        )
    assert refused.value.status == 403
    assert objects.get(G, V, P, "guarded")["status"]["reconciledWith"]["generation"] == 1  # type: ignore[index]

    second = operator(skipping_watches)
    wait_until(lambda: replicas_of(objects, "guarded-web") == 3, 60, "the changed Foo run")
    wait_until(lambda: available(objects, "guarded", 3), 90, "the Foo available at 3")
    wait_until(lambda: record_of(objects, "guarded").get("generation") == 2, 30, "the record of generation 2")
    assert runs_of(second, "guarded") >= 1


def tenant_client(objects: Objects, kubeconfig: str) -> client.ApiClient:
    """A client acting as a user who may read and update Foos in the namespace, but not their status."""
    user = f"tenant-{uuid.uuid4().hex[:6]}"
    rbac = client.RbacAuthorizationV1Api(objects.api)
    rbac.create_namespaced_role(
        objects.namespace,
        {
            "metadata": {"name": user},
            "rules": [{"apiGroups": [G], "resources": [P], "verbs": ["get", "list", "watch", "update", "patch"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        objects.namespace,
        {
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    tenant = config.new_client_from_config(config_file=kubeconfig)
    tenant.set_default_header("Impersonate-User", user)
    patch_foos = {"group": G, "resource": P, "verb": "patch", "namespace": objects.namespace}
    review = {"spec": {"resourceAttributes": patch_foos}}
    reviews = client.AuthorizationV1Api(tenant)
    wait_until(lambda: reviews.create_self_subject_access_review(review).status.allowed, 10, "the tenant's grant")
    return tenant
