"""operator-sdk's own test operator, unchanged, under our operator: the drop-in promise, checked for real.

The project is testdata/memcached-molecule-operator of ansible-operator-plugins, fetched through the Go
module proxy by hack/upstream-testdata.sh (nothing of it lives in this repository). Its watches.yaml,
playbooks and roles run as they are, with our bundled operator_sdk.util (Galaxy's is not installed). The
assertions are those of the project's own molecule/default verify tasks, plus what a migration needs:
drift after an operator restart is corrected, and a watched Secret's data change triggers a run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.helpers import missing_upstream_metrics
from tests.integration.conftest import Objects, OperatorProcess, condition, upstream_project, wait_until

pytestmark = pytest.mark.integration
G, V = "cache.example.com", "v1alpha1"
METRICS_MARKER = Path("/tmp/metricsbumped")  # the project's roles bump their metrics once per machine


@pytest.fixture(scope="module")
def project(api: client.ApiClient) -> Path:
    return upstream_project(api)


@pytest.fixture
def upstream(
    project: Path, operator: Callable[..., OperatorProcess], objects: Objects
) -> Iterator[Callable[[], OperatorProcess]]:
    """Starts the operator on the project's unchanged watches.yaml; cleans what its roles leave in default."""
    METRICS_MARKER.unlink(missing_ok=True)
    yield lambda: operator(project / "watches.yaml")
    METRICS_MARKER.unlink(missing_ok=True)
    for kind, name in (("service", "test-service"), ("config_map", "deleteme")):
        try:
            getattr(objects.core, f"delete_namespaced_{kind}")(name, "default")
        except ApiException as exc:
            if exc.status != 404:
                raise


def sample(project: Path, kind: str) -> dict[str, Any]:
    return dict(yaml.safe_load((project / "config" / "samples" / f"cache_v1alpha1_{kind}.yaml").read_text()))


def memcached_deployment(objects: Objects) -> Any:
    items = objects.apps.list_namespaced_deployment(objects.namespace, label_selector="app=memcached").items
    return items[0] if items else None


def service(objects: Objects) -> Any:
    try:
        return objects.core.read_namespaced_service("test-service", "default")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_memcached_molecule_operator_runs_unchanged(
    upstream: Callable[[], OperatorProcess], project: Path, objects: Objects
) -> None:
    op = upstream()
    cr = sample(project, "memcached")
    name = cr["metadata"]["name"]
    objects.create(G, V, "memcacheds", cr)

    # Its own checks: Successful on the first run, the Deployment at spec.size and available, status.test.
    obj = objects.wait_successful(G, V, "memcacheds", name, 120)
    assert obj["status"]["test"] == "hello world"
    assert (condition(obj, "Failure") or {}).get("status") != "True"
    wait_until(
        lambda: (dep := memcached_deployment(objects)) and dep.status.available_replicas == dep.spec.replicas == 1,
        90,
        "the memcached Deployment available at size 1",
    )
    # The Secret-driven Service: the role makes a Secret, the Secret watch's role makes the Service.
    wait_until(lambda: service(objects), 90, "test-service made by the secret role")

    # Custom metrics through operator_sdk.util.osdk_metric.
    metrics = wait_until(lambda: (text := op.metrics()) and "histogram_test_sum" in text and text, 30, "metrics")
    assert not missing_upstream_metrics(metrics), metrics

    # The blacklist: the ConfigMap the role makes never becomes a dependent watch.
    assert "watching dependent ConfigMap" not in op.log()

    # Scaling.
    objects.patch(G, V, "memcacheds", name, {"spec": {"size": 3}})
    wait_until(lambda: memcached_deployment(objects).spec.replicas == 3, 60, "the Deployment scaled to 3")

    # Migration: a restarted operator still puts drift back.
    assert op.terminate() == 0
    second = upstream()
    wait_until(lambda: "watching dependent Deployment.v1.apps" in second.log(), 90, "dependent watch recovered")
    dep_name = memcached_deployment(objects).metadata.name
    objects.apps.patch_namespaced_deployment_scale(dep_name, objects.namespace, {"spec": {"replicas": 1}})
    wait_until(lambda: memcached_deployment(objects).spec.replicas == 3, 60, "the Deployment put back at 3")

    # A watched Secret's data change is a run of the Secret's role: it makes the Service again.
    objects.core.delete_namespaced_service("test-service", "default")
    wait_until(lambda: service(objects) is None, 30, "test-service gone")
    objects.core.patch_namespaced_secret("test-secret", objects.namespace, {"data": {"test": "Y2hhbmdlZAo="}})
    wait_until(lambda: service(objects), 60, "test-service made again after the Secret changed")

    # The finalizer role (memfin) deletes the ConfigMap `deleteme`; the Deployment goes with its owner.
    objects.core.create_namespaced_config_map("default", {"metadata": {"name": "deleteme"}, "data": {"delete": "me"}})
    objects.delete(G, V, "memcacheds", name)
    wait_until(lambda: objects.get(G, V, "memcacheds", name) is None, 60, "the Memcached deleted")

    def configmap_gone() -> bool:
        try:
            objects.core.read_namespaced_config_map("deleteme", "default")
        except ApiException as exc:
            return exc.status == 404
        return False

    assert configmap_gone()
    wait_until(lambda: memcached_deployment(objects) is None, 60, "the Deployment collected with its owner")
    assert "Traceback" not in second.log()
