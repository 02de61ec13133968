"""Running it for months: owned children and dependent watches, no reconcile storms, leader election,
metrics and probes. Real API server, real operator processes."""

from __future__ import annotations

import re
import time

import pytest

from tests.integration.conftest import FIXTURES, Objects, condition, wait_until
from tests.integration.test_runtime import G, P, V, demo

pytestmark = pytest.mark.integration
WATCHES = FIXTURES / "projects" / "demo" / "watches.yaml"
GVK = "Demo.v1.test.hybrid-operator.dev"


def reconciles(metrics_text: str) -> float:
    """Total reconciles the operator reports, whatever their result."""
    total = 0.0
    for line in metrics_text.splitlines():
        if line.startswith("ansible_operator_reconcile_result_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_children_get_an_owner_reference_and_drift_is_put_back(operator, objects: Objects) -> None:
    operator(WATCHES)
    created = objects.create(G, V, P, demo("parent", message="declared", childName="parent-child"))
    objects.wait_successful(G, V, P, "parent", 60)
    child = objects.core.read_namespaced_config_map("parent-child", objects.namespace)
    refs = child.metadata.owner_references
    assert [(r.kind, r.name, r.uid, r.controller) for r in refs] == [
        ("Demo", "parent", created["metadata"]["uid"], True)
    ]

    objects.core.patch_namespaced_config_map("parent-child", objects.namespace, {"data": {"message": "drifted"}})
    wait_until(
        lambda: (
            objects.core.read_namespaced_config_map("parent-child", objects.namespace).data["message"] == "declared"
        ),
        30,
        "the owner's next reconcile to put the child back",
    )
    objects.core.delete_namespaced_config_map("parent-child", objects.namespace)
    wait_until(
        lambda: (
            objects.core.read_namespaced_config_map("parent-child", objects.namespace).data["message"] == "declared"
        ),
        30,
        "the deleted child to be recreated",
    )


def test_sixty_quiet_seconds_after_convergence_cost_zero_runs(operator, objects: Objects) -> None:
    op = operator(WATCHES)
    for i in range(3):
        objects.create(G, V, P, demo(f"calm-{i}", childName=f"calm-{i}-child"))
    for i in range(3):
        objects.wait_successful(G, V, P, f"calm-{i}", 90)
    time.sleep(3)  # let the last status writes and child events arrive
    before = reconciles(op.metrics())
    time.sleep(60)
    after = reconciles(op.metrics())
    assert after == before, f"{after - before} reconciles during 60 quiet seconds"


def test_metrics_and_probes_report_real_state(operator, objects: Objects) -> None:
    op = operator(WATCHES)
    code, text = op.http(op.health_port, "/readyz")
    assert code == 200
    assert "watches synced" in text
    assert op.http(op.health_port, "/healthz")[0] == 200
    objects.create(G, V, P, demo("counted"))
    objects.wait_successful(G, V, P, "counted", 60)
    metrics = op.metrics_with(f'ansible_operator_reconcile_result_total{{GVK="{GVK}",result="succeeded"}}')
    assert f'ansible_operator_reconcile_result_total{{GVK="{GVK}",result="succeeded"}}' in metrics
    count = re.search(rf'ansible_operator_reconciles_count{{GVK="{GVK}"}} (\S+)', metrics)
    assert count and float(count.group(1)) >= 1
    total = re.search(rf'ansible_operator_reconciles_sum{{GVK="{GVK}"}} (\S+)', metrics)
    assert total and float(total.group(1)) > 0.3, "the histogram measures the whole run, not its spawn"
    for name in (
        "hybrid_operator_queue_depth",
        "hybrid_operator_runs_in_flight",
        "hybrid_operator_reconcile_retries_total",
        "hybrid_operator_leader 1.0",
        "ansible_operator_build_info{",
    ):
        assert name in metrics


def test_not_ready_while_the_crd_is_missing(operator, tmp_path) -> None:
    watches = tmp_path / "watches.yaml"
    role = FIXTURES / "projects" / "demo" / "roles" / "demo"
    watches.write_text(f"- version: v1\n  group: missing.hybrid-operator.dev\n  kind: Nothing\n  role: {role}\n")
    op = operator(watches, wait_ready=False)
    wait_until(
        lambda: "not served by the API server yet" in op.http(op.health_port, "/readyz")[1], 90, "readyz to say why"
    )
    code, _text = op.http(op.health_port, "/readyz")
    assert code == 503
    assert op.http(op.health_port, "/healthz")[0] == 200


def test_one_leader_reconciles_and_a_stand_by_takes_over_after_kill(operator, objects: Objects) -> None:
    lease = f"leader-{objects.namespace}"
    flags = ("--leader-elect", "--leader-election-id", lease, "--leader-election-namespace", objects.namespace)
    first = operator(WATCHES, *flags)
    second = operator(WATCHES, *flags)
    leader, standby = (first, second) if "became the leader" in first.log() else (second, first)
    assert "became the leader" in leader.log()
    assert "became the leader" not in standby.log()
    assert standby.ready(), "a stand-by that can take over reports ready"

    objects.create(G, V, P, demo("before-kill"))
    objects.wait_successful(G, V, P, "before-kill", 60)
    assert "name=before-kill" in leader.log()
    assert "name=before-kill" not in standby.log()

    leader.kill()
    killed_at = time.monotonic()
    objects.create(G, V, P, demo("after-kill"))  # pending work while nobody leads
    wait_until(lambda: "became the leader" in standby.log(), 15 + 10, "the stand-by to take over")
    objects.wait_successful(G, V, P, "after-kill", 30)
    assert time.monotonic() - killed_at < 15 + 10 + 30
    # No object ran in both at once: an overlap would have failed the demo role's per-object lock.
    assert condition(objects.get(G, V, P, "after-kill"), "Failure")["status"] == "False"


def test_a_new_object_goes_before_the_restart_resync_of_converged_ones(operator, objects: Objects) -> None:
    """operator-sdk#5246: after a restart, a new object waited behind the re-reconcile of every old one."""
    first = operator(WATCHES, "--max-concurrent-reconciles", "1")
    old = [f"old-{i}" for i in range(8)]
    for name in old:
        objects.create(G, V, P, demo(name))
    for name in old:
        objects.wait_successful(G, V, P, name, 120)
    assert first.terminate(60) == 0

    second = operator(WATCHES, "--max-concurrent-reconciles", "1")
    objects.create(G, V, P, demo("newcomer"))
    objects.wait_successful(G, V, P, "newcomer", 60)
    runs = [line for line in second.log().splitlines() if " reconciled " in line]
    position = next(i for i, line in enumerate(runs) if "name=newcomer" in line)
    assert position <= 2, f"the newcomer ran after {position} resyncs:\n" + "\n".join(runs)
