"""The Foo operator (roles/foo, watches.yaml) end to end: sample-controller's behaviour on a real cluster."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Objects, OperatorProcess, condition, wait_until

pytestmark = pytest.mark.integration
G, V, P = "samplecontroller.k8s.io", "v1alpha1", "foos"


def foo(name: str, deployment: str, replicas: int = 1) -> dict[str, object]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "Foo",
        "metadata": {"name": name},
        "spec": {"deploymentName": deployment, "replicas": replicas},
    }


def available(objects: Objects, name: str, replicas: int) -> dict | None:
    obj = objects.get(G, V, P, name)
    status = (obj or {}).get("status") or {}
    ok = (condition(obj, "Successful") or {}).get("status") == "True"
    return obj if ok and status.get("availableReplicas") == replicas else None


def replicas_of(objects: Objects, deployment: str) -> int:
    return int(objects.apps.read_namespaced_deployment(deployment, objects.namespace).spec.replicas)


def test_foo_creates_an_owned_deployment_and_reports_availability(operator, objects: Objects, foo_watches) -> None:
    running = operator(foo_watches)
    created = objects.create(G, V, P, foo("example-foo", "example-foo"))
    obj = wait_until(lambda: available(objects, "example-foo", 1), 90, "availableReplicas 1")
    dep = objects.apps.read_namespaced_deployment("example-foo", objects.namespace)
    assert dep.spec.replicas == 1
    assert dep.metadata.labels == {"app": "example-foo", "controller": "example-foo"}
    refs = dep.metadata.owner_references
    assert [(r.kind, r.uid, r.controller) for r in refs] == [("Foo", created["metadata"]["uid"], True)]
    assert obj["status"]["observedGeneration"] == 1
    wait_until(lambda: [e for e in objects.events("example-foo") if e.reason == "Synced"], 30, "a Synced event")
    # CI runs this test on every supported ansible-core: the default executor must have run it warm there.
    assert "self-test passed" in running.log() and "switched itself off" not in running.log()


def test_deployment_scaled_by_hand_is_put_back(operator, objects: Objects, foo_watches) -> None:
    operator(foo_watches)
    objects.create(G, V, P, foo("steady", "steady-web", replicas=2))
    wait_until(lambda: available(objects, "steady", 2), 90, "availableReplicas 2")
    objects.apps.patch_namespaced_deployment_scale("steady-web", objects.namespace, {"spec": {"replicas": 5}})
    wait_until(lambda: replicas_of(objects, "steady-web") == 2, 60, "the Deployment back at 2 replicas")


def test_drift_after_an_operator_restart_is_put_back(operator, objects: Objects, foo_watches) -> None:
    """The restarted operator's runs only read and patch the Deployment (no create): reading it is enough
    for the operator to watch Deployments again, as upstream's proxy recovers dependent watches."""
    first = operator(foo_watches)
    objects.create(G, V, P, foo("restarted", "restarted-web", replicas=2))
    wait_until(lambda: available(objects, "restarted", 2), 90, "availableReplicas 2")
    assert first.terminate() == 0
    second = operator(foo_watches)
    wait_until(lambda: "watching dependent Deployment.v1.apps" in second.log(), 60, "the dependent watch recovered")
    objects.apps.patch_namespaced_deployment_scale("restarted-web", objects.namespace, {"spec": {"replicas": 5}})
    wait_until(lambda: replicas_of(objects, "restarted-web") == 2, 60, "the Deployment back at 2 replicas")


def test_scaling_the_foo_scales_the_deployment(operator, objects: Objects, foo_watches) -> None:
    operator(foo_watches)
    objects.create(G, V, P, foo("grow", "grow-web"))
    wait_until(lambda: available(objects, "grow", 1), 90, "availableReplicas 1")
    objects.patch(G, V, P, "grow", {"spec": {"replicas": 3}})
    wait_until(lambda: replicas_of(objects, "grow-web") == 3, 60, "the Deployment at 3 replicas")
    wait_until(lambda: available(objects, "grow", 3), 60, "availableReplicas 3")


def test_a_deployment_not_owned_is_left_alone(operator, objects: Objects, foo_watches) -> None:
    body = {
        "metadata": {"name": "not-owned"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "mine"}},
            "template": {
                "metadata": {"labels": {"app": "mine"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    before = objects.apps.create_namespaced_deployment(objects.namespace, body)
    operator(foo_watches)
    objects.create(G, V, P, foo("intruder", "not-owned"))

    def conflict() -> dict | None:
        cond = condition(objects.get(G, V, P, "intruder"), "Failure")
        return cond if cond and cond.get("status") == "True" else None

    cond = wait_until(conflict, 90, "Failure=True")
    assert cond["reason"] == "ErrResourceExists"
    message = "Resource not-owned already exists and is not managed by Foo"
    assert cond["message"] == message
    warnings = wait_until(
        lambda: [e for e in objects.events("intruder") if e.type == "Warning" and e.message == message],
        30,
        "a Warning event",
    )
    assert warnings[0].reason == "ErrResourceExists"
    after = objects.apps.read_namespaced_deployment("not-owned", objects.namespace)
    assert after.spec.replicas == 4
    assert after.metadata.generation == before.metadata.generation  # its spec was never written
    assert not after.metadata.owner_references


def test_new_deployment_name_replaces_the_old_deployment(operator, objects: Objects, foo_watches) -> None:
    operator(foo_watches)
    objects.create(G, V, P, foo("mover", "first-web"))
    wait_until(lambda: available(objects, "mover", 1), 90, "availableReplicas 1")
    objects.patch(G, V, P, "mover", {"spec": {"deploymentName": "second-web"}})
    wait_until(lambda: replicas_of(objects, "second-web") == 1, 60, "the new Deployment")

    def old_gone() -> bool:
        names = [d.metadata.name for d in objects.apps.list_namespaced_deployment(objects.namespace).items]
        return "first-web" not in names

    wait_until(old_gone, 60, "the old Deployment to go")


def runs_started_after(op: OperatorProcess, namespace: str, name: str, since: float) -> list[dict[str, Any]]:
    """The finished runs of Foo ``name`` that started after ``since`` (seconds since the epoch), oldest first:
    each the counts of its play's closing stats (``changed``, ``ok``... per host), read from its artifacts."""
    runs = []
    for events in (op.artifacts / G / V / "Foo" / namespace / name).glob("*/artifacts/*/job_events"):
        try:
            loaded = [json.loads(path.read_text()) for path in events.glob("*.json")]
        except ValueError:
            continue  # an event being written: the run is not over
        start = next((e["created"] for e in loaded if e["event"] == "playbook_on_start"), None)
        stats = next((e["event_data"] for e in loaded if e["event"] == "playbook_on_stats"), None)
        if start is not None and stats is not None and datetime.fromisoformat(start).timestamp() > since:
            runs.append((start, stats))
    return [stats for _, stats in sorted(runs, key=lambda run: datetime.fromisoformat(run[0]))]


def changed(stats: dict[str, Any]) -> int:
    return sum((stats.get("changed") or {}).values())


def test_a_converged_foo_reconciles_with_no_changes(operator, objects: Objects, foo_watches) -> None:
    """The converged Foo's own next run changes nothing: the first run that started after a new
    reconcile-period annotation asked for one (runs before it, such as the one its Deployment's
    availability woke, prove nothing), read from that run's artifacts."""
    running = operator(foo_watches)
    objects.create(G, V, P, foo("idem", "idem-web"))
    wait_until(lambda: available(objects, "idem", 1), 90, "availableReplicas 1")
    first = runs_started_after(running, objects.namespace, "idem", 0)[0]
    assert changed(first) > 0, first  # the stats tell a run that changed something: the one that made it
    asked = time.time()
    objects.patch(
        G, V, P, "idem", {"metadata": {"annotations": {"ansible.sdk.operatorframework.io/reconcile-period": "1h"}}}
    )
    runs = wait_until(lambda: runs_started_after(running, objects.namespace, "idem", asked), 60, "the next run")
    assert changed(runs[0]) == 0 and not runs[0].get("failures"), runs[0]
    assert sum((runs[0].get("ok") or {}).values()) > 0, runs[0]  # it ran the role's tasks


def test_a_deployments_status_wakes_its_foo(operator, objects: Objects, foo_watches: Path) -> None:
    """watchDependentStatusChanges: availableReplicas reaches the Foo when the Deployment's status changes,
    not at the role's timed requeue (an hour away here)."""
    foo_watches.write_text(foo_watches.read_text() + "  vars:\n    foo_requeue_after: 1h\n")
    operator(foo_watches)
    objects.create(G, V, P, foo("woken", "woken-web", 2))
    # Two pods made available by the bed's simulated node, then the wake: over a minute on a loaded bed (the
    # other tests' operators beside it). Anything under the hour of the timed requeue proves the wake.
    wait_until(lambda: available(objects, "woken", 2), 120, "availableReplicas 2 without the timed requeue")


def proxy_reads(metrics: str, source: str) -> float:
    line = f'hybrid_operator_proxy_reads_total{{source="{source}"}} '
    return sum(float(row[len(line) :]) for row in metrics.splitlines() if row.startswith(line))


def test_foo_converges_with_reads_from_the_informer_cache(operator, objects: Objects, foo_watches) -> None:
    """With --proxy-cache-reads the role's reads of its Deployment come from the operator's watch of
    Deployments, and the Foo still converges and puts back a Deployment scaled by hand."""
    running = operator(foo_watches, "--proxy-cache-reads=true")
    objects.create(G, V, P, foo("cached", "cached-web", replicas=2))
    wait_until(lambda: available(objects, "cached", 2), 90, "availableReplicas 2")
    objects.apps.patch_namespaced_deployment_scale("cached-web", objects.namespace, {"spec": {"replicas": 5}})
    wait_until(lambda: replicas_of(objects, "cached-web") == 2, 60, "the Deployment back at 2 replicas")
    metrics = running.metrics()
    # The first run reads before the Deployment watch exists (from the API server); the run its
    # availability wakes and the run that puts the scale back each read the Deployment twice (k8s_info,
    # then the apply's own GET), from the cache: four GETs the API server never saw.
    assert proxy_reads(metrics, "cache") >= 4, metrics
    assert proxy_reads(metrics, "api") >= 2, metrics
