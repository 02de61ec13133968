"""Drop-in details checked with the operator running against the test bed: what the run proxy writes into
what a role creates, inventories from ANSIBLE_INVENTORY, and ignored task failures in the log."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import FIXTURES, Objects, OperatorProcess, condition, wait_until

pytestmark = pytest.mark.integration
GROUP, VERSION, PLURAL = "test.hybrid-operator.dev", "v1", "opens"
PROJECT = FIXTURES / "projects" / "dropin"


def open_obj(name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Open", "metadata": {"name": name}, "spec": spec or {}}


@pytest.fixture
def rbac(api: client.ApiClient) -> Iterator[client.RbacAuthorizationV1Api]:
    """Cluster-scoped children outlive the test namespace (nothing owns them): removed here."""
    rbac = client.RbacAuthorizationV1Api(api)
    yield rbac
    for role in rbac.list_cluster_role().items:
        if role.metadata.name.startswith("dropin-t-"):
            try:
                rbac.delete_cluster_role(role.metadata.name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def test_reviews_pass_untouched_and_a_cluster_scoped_child_gets_annotations(
    operator: Callable[..., OperatorProcess], objects: Objects, rbac: client.RbacAuthorizationV1Api
) -> None:
    """The API server answered 422 to a SelfSubjectAccessReview carrying an owner, and a ClusterRole of a
    namespaced resource got an ownerReference the garbage collector calls OwnerRefInvalidNamespace."""
    op = operator(PROJECT / "watches-owners.yaml")
    objects.create(GROUP, VERSION, PLURAL, open_obj("asker"))
    objects.wait_successful(GROUP, VERSION, PLURAL, "asker", 120, operator=op)
    name = f"dropin-{objects.namespace}-asker"
    meta = rbac.read_cluster_role(name).metadata
    assert not meta.owner_references
    assert meta.annotations["operator-sdk/primary-resource"] == f"{objects.namespace}/asker"
    assert meta.annotations["operator-sdk/primary-resource-type"] == "Open.test.hybrid-operator.dev"

    # Still a dependent: a change to it brings the owner's role back, which restores it.
    rbac.patch_cluster_role(name, {"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]})
    wait_until(
        lambda: rbac.read_cluster_role(name).rules[0].resources == ["configmaps"], 60, "the ClusterRole restored"
    )
    # A 422 status, not the digits inside a port number, a timestamp or a name (the test's namespace is
    # t-<8 hex digits>: t-bde422d1 failed this once).
    assert re.search(r"(?<![\w:.-])422(?![\w-])", op.log()) is None
    # The role's ignored failure is in the log, as upstream logs every failed task, with object and task.
    line = next(ln for ln in op.log().splitlines() if "let pass by the role" in ln)
    assert "(ignore_errors): no optional setting given" in line
    assert f"namespace={objects.namespace}" in line and "name=asker" in line and "run_id=" in line
    assert "task=" in line and "Check for an optional setting" in line


@pytest.mark.parametrize("executor", ["warm", "runner"])
def test_a_play_for_a_group_of_the_projects_inventory(
    operator: Callable[..., OperatorProcess], objects: Objects, executor: str
) -> None:
    """ANSIBLE_INVENTORY names a directory (hosts and group_vars): every run gets it instead of localhost."""
    op = operator(
        PROJECT / "watches-inventory.yaml",
        "--executor",
        executor,
        env={"ANSIBLE_INVENTORY": str(PROJECT / "inventory")},
    )
    objects.create(GROUP, VERSION, PLURAL, open_obj("grouped"))
    objects.wait_successful(GROUP, VERSION, PLURAL, "grouped", 120, operator=op)
    data = objects.core.read_namespaced_config_map("grouped-inventory", objects.namespace).data
    assert data == {"host": "operator-host", "greeting": "from the inventory's group_vars"}
    assert "switched itself off" not in op.log()


def test_a_422_from_the_api_server_names_the_fields_in_the_failure(
    operator: Callable[..., OperatorProcess], objects: Objects
) -> None:
    """kubernetes.core reports a refused object with the whole Status JSON in its message: the Failure
    condition (and its Warning Event) name each field and what is wrong with it instead."""
    operator(PROJECT / "watches-invalid.yaml")
    objects.create(GROUP, VERSION, PLURAL, open_obj("refused", {"replicas": -1, "label": "not a label!"}))

    def failed() -> dict[str, Any] | None:
        failure = condition(objects.get(GROUP, VERSION, PLURAL, "refused"), "Failure")
        return failure if failure and failure.get("status") == "True" else None

    message = str(wait_until(failed, 120, "refused Failure")["message"])
    assert "invalid : Apply a Deployment the API server refuses: Failed to create object: " in message
    assert 'Deployment.apps "refused" is invalid: ' in message
    assert "spec.replicas: Invalid value: -1: must be greater than or equal to 0" in message
    assert 'metadata.labels: Invalid value: "not a label!": ' in message
    assert '"kind"' not in message and "Status" not in message and len(message) <= 1000
    events = wait_until(lambda: [e for e in objects.events("refused") if e.type == "Warning"], 30, "a Warning Event")
    assert "spec.replicas: Invalid value: -1" in events[0].message
