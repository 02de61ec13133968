"""The runtime end to end: real API server, real operator process, real ansible-runner and collections.

Uses the demo operator in tests/fixtures/projects/demo (a role that echoes its spec into the status,
fails on request, holds a per-object lock to catch overlapping runs, and a finalizer role).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client

from bench.scraping import metric_sum
from tests.helpers import successful
from tests.integration.conftest import FIXTURES, Objects, condition, wait_until

pytestmark = pytest.mark.integration

G, V, P = "test.hybrid-operator.dev", "v1", "demos"
WATCHES = FIXTURES / "projects" / "demo" / "watches.yaml"


def demo(name: str, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "Demo",
        "metadata": {"name": name},
        "spec": {"message": "hi", **spec},
    }


def test_create_reconciles_to_successful_with_observed_generation(operator, objects: Objects) -> None:
    operator(WATCHES)
    created = objects.create(G, V, P, demo("one"))
    obj = objects.wait_successful(G, V, P, "one", 60)
    status = obj["status"]
    assert status["observedGeneration"] == created["metadata"]["generation"]
    assert status["echoed"] == "hi"
    assert status["compatible"] is True  # operator_sdk.util.k8s_status works without Galaxy
    assert status["uid"] == created["metadata"]["uid"]
    running = condition(obj, "Running")
    assert running["reason"] == "Successful"
    assert running["ansibleResult"]["failures"] == 0
    assert condition(obj, "Failure")["status"] == "False"
    assert "test.hybrid-operator.dev/cleanup" in obj["metadata"]["finalizers"]


def test_failing_role_reports_failure_and_recovers(operator, objects: Objects) -> None:
    op = operator(WATCHES)
    objects.create(G, V, P, demo("broken", fail=True))

    def failed() -> dict | None:
        cond = condition(objects.get(G, V, P, "broken"), "Failure")
        return cond if cond and cond["status"] == "True" else None

    cond = wait_until(failed, 60, "Failure=True")
    assert cond["reason"] == "Failed"
    assert "demo failure requested for broken" in cond["message"]
    warning = wait_until(
        lambda: [e for e in objects.events("broken") if e.type == "Warning" and "demo failure" in e.message],
        30,
        "a Warning event with the task message",
    )
    assert warning[0].reason == "Failed"
    assert "demo failure requested for broken" in op.log()  # the failed task's output is logged

    objects.patch(G, V, P, "broken", {"spec": {"fail": False}})
    obj = objects.wait_successful(G, V, P, "broken", 90, generation=2)
    assert condition(obj, "Failure")["status"] == "False"
    wait_until(lambda: [e for e in objects.events("broken") if e.reason == "Recovered"], 30, "a Recovered event")


def test_jinja_in_spec_is_data_not_code(operator, objects: Objects, tmp_path: Path) -> None:
    operator(WATCHES)
    payload = "{{ lookup('pipe', 'id') }}"
    objects.create(G, V, P, demo("inject", message=payload, childName="inject-child"))
    obj = objects.wait_successful(G, V, P, "inject", 60)
    assert obj["status"]["echoed"] == payload
    child = objects.core.read_namespaced_config_map("inject-child", objects.namespace)
    assert child.data["message"] == payload
    assert "uid=" not in json.dumps(obj["status"])


def test_finalizer_runs_on_delete_and_the_object_goes(operator, objects: Objects) -> None:
    operator(WATCHES)
    objects.create(G, V, P, demo("doomed"))
    objects.wait_successful(G, V, P, "doomed", 60)
    objects.delete(G, V, P, "doomed")
    wait_until(lambda: objects.get(G, V, P, "doomed") is None, 60, "the Demo to disappear")
    marker = objects.core.read_namespaced_config_map(f"{objects.namespace}-doomed-finalized", "default")
    assert marker.data == {"finalized": "true"}
    # Created in another namespace, so it points back to its owner by annotation, not ownerReference.
    assert marker.metadata.annotations["operator-sdk/primary-resource"] == f"{objects.namespace}/doomed"
    assert marker.metadata.annotations["operator-sdk/primary-resource-type"] == "Demo.test.hybrid-operator.dev"
    objects.core.delete_namespaced_config_map(marker.metadata.name, "default")


def test_twenty_at_once_all_converge_without_overlapping_runs(operator, objects: Objects) -> None:
    op = operator(WATCHES, "--max-concurrent-reconciles", "2")
    names = [f"many-{i:02d}" for i in range(20)]
    for name in names:
        objects.create(G, V, P, demo(name, sleepSeconds=1))
    # Change some while they may be running: the queue must collapse, never overlap.
    for name in names[:5]:
        objects.patch(G, V, P, name, {"spec": {"message": "changed"}})
    for name in names:
        objects.wait_successful(G, V, P, name, 180)
    for name in names[:5]:
        obj = objects.wait_successful(G, V, P, name, 60, generation=2)
        assert obj["status"]["echoed"] == "changed"
    # An overlapping run would have failed on the per-object lock.
    assert "Fail if another run of this object is in progress" not in op.log()
    metrics = op.metrics()
    assert (
        'ansible_operator_reconcile_result_total{GVK="Demo.v1.test.hybrid-operator.dev",result="failed"}' not in metrics
    )


def test_sigterm_lets_the_running_reconcile_finish(operator, objects: Objects) -> None:
    op = operator(WATCHES)
    objects.create(G, V, P, demo("slow", sleepSeconds=4))
    wait_until(lambda: condition(objects.get(G, V, P, "slow"), "Running"), 30, "the run to start")
    assert op.terminate(60) == 0
    assert objects.successful(G, V, P, "slow"), "the run in progress at SIGTERM completed and reported"
    assert "stopped" in op.log()


def test_bad_watches_file_fails_at_start_naming_entry_and_field(operator, tmp_path: Path) -> None:
    bad = tmp_path / "watches.yaml"
    role = FIXTURES / "projects" / "demo" / "roles" / "demo"
    bad.write_text(f"- version: v1\n  group: x.example.com\n  kind: X\n  role: {role}\n  reconcilePeriod: soon\n")
    op = operator(bad, wait_ready=False)
    assert op.proc.wait(60) == 2
    assert "entry 0 (x.example.com/v1/X): field 'reconcilePeriod'" in op.log()


COUNTED_ROLE = """---
- name: Report the spec's message, in the run's result
  hybrid_operator.util.k8s_status:
    api_version: test.hybrid-operator.dev/v1
    kind: Counted
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      echoed: "{{ message }}"
"""


def requests_on(api: client.ApiClient, plural: str) -> Counter[str]:
    """What the API server itself counted on ``plural`` of the test group: its GETs and its status PATCHes
    (its ``apiserver_request_total``, which counts every client of every namespace)."""
    headers = dict(api.default_headers)
    for key, token in (api.configuration.api_key or {}).items():  # a token kubeconfig (the beds' use certs)
        prefix = (api.configuration.api_key_prefix or {}).get(key)
        headers["Authorization"] = f"{prefix} {token}" if prefix else str(token)
    response = api.call_api("GET", f"{api.configuration.host}/metrics", header_params=headers)
    assert response.status == 200, response.status
    text = response.read().decode()
    counted: Counter[str] = Counter()
    for verb, sub in (("GET", ""), ("PATCH", "status")):
        marks = (f'group="{G}"', f'resource="{plural}"', f'subresource="{sub}"', f'verb="{verb}"')
        total = metric_sum(text, "apiserver_request_total", lambda labels, m=marks: all(x in labels for x in m))
        counted[verb + (f"/{sub}" if sub else "")] = int(total)
    return counted


def test_a_reconcile_reads_nothing_back_from_the_api_server(operator, objects: Objects, api, tmp_path: Path) -> None:
    """After a run the status goes out as one patch from the copy the watch holds (its resourceVersion checked
    by the API server): a run that leaves its object alone costs its kind no GET, only the Running and the
    final status patches. Waited for with LISTs, so that the test's own reads are not GETs either."""
    tasks = tmp_path / "roles" / "counted" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(COUNTED_ROLE)
    watches = tmp_path / "watches.yaml"
    watches.write_text(f"---\n- version: {V}\n  group: {G}\n  kind: Counted\n  role: {tasks.parent}\n")
    operator(watches)
    custom = client.CustomObjectsApi(api)

    def all_successful(generations: dict[str, int]) -> dict[str, dict[str, Any]] | None:
        listed = cast(dict[str, Any], custom.list_namespaced_custom_object(G, V, objects.namespace, "counteds"))
        items = listed["items"]
        done = {o["metadata"]["name"]: o for o in items if successful(o, generations.get(o["metadata"]["name"]))}
        return done if set(done) >= set(generations) else None

    before = requests_on(api, "counteds")
    for name in ("one", "two"):
        objects.create(
            G,
            V,
            "counteds",
            {"apiVersion": f"{G}/{V}", "kind": "Counted", "metadata": {"name": name}, "spec": {"message": "hi"}},
        )
    wait_until(lambda: all_successful({"one": 1, "two": 1}), 60, "both Counteds Successful")
    objects.patch(G, V, "counteds", "one", {"spec": {"message": "changed"}})
    done = wait_until(lambda: all_successful({"one": 2, "two": 1}), 60, "one Successful at generation 2")
    assert done is not None
    assert done["one"]["status"]["echoed"] == "changed"
    spent = requests_on(api, "counteds") - before
    assert spent["GET"] == 0, spent
    # Running and the final status for each of the three generations; a conflict would add one of each.
    assert spent["PATCH/status"] >= 6, spent
