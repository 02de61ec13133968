"""Untrusted input on the real test bed, tried as an attacker would: a CR author against the operator.

The kind is permissive (spec and status accept any field, as operator-sdk scaffolds), the operator runs
with its default flags, and the role only uses kubernetes.core and our status plugin. Every attack leaves
a marker file's path in the object; the marker must never appear, the object must fail visibly (Failure
condition and a Warning Event naming the field), and the rest of the kind must keep reconciling.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from hybrid_operator.kube.client import Kube
from hybrid_operator.kube.objects import GVK
from tests.integration.conftest import FIXTURES, Objects, OperatorProcess, condition, wait_until

pytestmark = pytest.mark.integration
GROUP, VERSION, PLURAL = "test.hybrid-operator.dev", "v1", "opens"
WATCHES = FIXTURES / "projects" / "open" / "watches.yaml"
PERIOD = "ansible.sdk.operatorframework.io/reconcile-period"
VERBOSITY = "ansible.sdk.operatorframework.io/verbosity"


def open_obj(name: str, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Open", "metadata": meta, "spec": spec}


def failure(objects: Objects, name: str, reason: str, timeout: float = 60) -> dict[str, Any]:
    def failed() -> dict[str, Any] | None:
        cond = condition(objects.get(GROUP, VERSION, PLURAL, name), "Failure")
        return cond if cond and cond.get("status") == "True" and cond.get("reason") == reason else None

    return dict(wait_until(failed, timeout, f"{name} Failure/{reason}"))


def settled(objects: Objects, name: str) -> bool:
    """The object got a verdict: it succeeded or failed (whichever, the test asserts which)."""
    obj = objects.get(GROUP, VERSION, PLURAL, name)
    return any((condition(obj, t) or {}).get("status") == "True" for t in ("Successful", "Failure"))


def warning_event(objects: Objects, name: str, reason: str) -> Any:
    def found() -> Any:
        return next((e for e in objects.events(name) if e.type == "Warning" and e.reason == reason), None)

    return wait_until(found, 30, f"Warning event {reason} on {name}")


def runs_of(op: OperatorProcess, namespace: str, name: str) -> list[Path]:
    base = op.artifacts / GROUP / VERSION / "Open" / namespace / name
    return sorted(p for p in base.iterdir() if p.is_dir()) if base.exists() else []


@pytest.fixture
def hostile(operator: Callable[..., OperatorProcess], crds: None, objects: Objects) -> OperatorProcess:
    return operator(WATCHES)


def _attacks(marker: Path) -> dict[str, dict[str, Any]]:
    touch = f"touch {marker}"
    return {
        "shell-executable": {"ansibleShellExecutable": f"{touch};/bin/sh"},
        "remote-tmp": {"ansibleRemoteTmp": f"/tmp/y$({touch})"},
        "remote-tmp-snake": {"ansible_remote_tmp": f"/tmp/y$({touch})"},
        "ssh-proxy": {"ansibleConnection": "ssh", "ansibleSshCommonArgs": f"-o ProxyCommand='{touch}'"},
        "interpreter": {"ansiblePythonInterpreter": f"/bin/sh -c '{touch}'"},
        "role-internal": {"_openGreeting": "overridden by the CR"},
        "operator-var": {"ansible_operator_meta": {"name": "someone-else", "namespace": "kube-system"}},
        "magic-omit": {"omit": "x", "message": "hi"},
    }


@pytest.mark.parametrize("attack", sorted(_attacks(Path("/x"))))
def test_spec_keys_that_steer_ansible_fail_the_object_and_never_run(
    attack: str, hostile: OperatorProcess, objects: Objects, namespace: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    spec = _attacks(marker)[attack]
    objects.create(GROUP, VERSION, PLURAL, open_obj("evil", spec))
    objects.create(GROUP, VERSION, PLURAL, open_obj("good", {"message": "{{ lookup('pipe', 'id') }}"}))

    good = objects.wait_successful(GROUP, VERSION, PLURAL, "good")
    wait_until(lambda: settled(objects, "evil"), 60, "evil handled")
    assert not marker.exists()
    cond = failure(objects, "evil", "InvalidSpec")
    bad_keys = [k for k in spec if k != "message"]
    for key in bad_keys:
        assert repr(key) in cond["message"]
    assert "'message'" not in cond["message"]
    event = warning_event(objects, "evil", "InvalidSpec")
    assert repr(bad_keys[0]) in event.message

    assert good["status"]["greeting"] == "hello from the role"
    assert good["status"]["message"] == "{{ lookup('pipe', 'id') }}"  # data, never a template

    time.sleep(3)  # no retry loop: the refused object is looked at once per change
    assert sum("not running" in line and "evil" in line for line in hostile.log().splitlines()) == 1
    assert runs_of(hostile, namespace, "evil") == []
    assert not marker.exists()

    # The author fixes the spec: a new generation, and this time it runs.
    patch = {"spec": {k: None for k in bad_keys}}
    objects.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "evil", patch)
    fixed = objects.wait_successful(GROUP, VERSION, PLURAL, "evil")
    assert fixed["status"]["greeting"] == "hello from the role"
    assert not marker.exists()


def _nested_key_attacks(payload: str) -> dict[str, tuple[dict[str, Any], str]]:
    """A key Ansible's JSON decoder reads as an instruction, deep in the spec, and the path it is named by."""
    return {
        "map": ({"message": payload, "extra": {"deep": {"__ansible_unsafe": 1}}}, "spec.extra.deep.__ansible_unsafe"),
        "list": (
            {"message": payload, "entries": [{"a": 1}, {"__ansible_unsafe": 1}]},
            "spec.entries[1].__ansible_unsafe",
        ),
        "string-map": ({"message": payload, "podLabels": {"__ansible_type": "x"}}, "spec.podLabels.__ansible_type"),
        "vault": ({"message": payload, "extra": {"__ansible_vault": 1}}, "spec.extra.__ansible_vault"),
    }


@pytest.mark.parametrize("attack", sorted(_nested_key_attacks("")))
def test_a_reserved_key_deep_in_the_spec_fails_the_object_naming_its_path(
    attack: str, hostile: OperatorProcess, objects: Objects, namespace: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    spec, path = _nested_key_attacks(f"{{{{ lookup('pipe', 'id > {marker}') }}}}")[attack]
    objects.create(GROUP, VERSION, PLURAL, open_obj("evil", spec))
    objects.create(GROUP, VERSION, PLURAL, open_obj("good", {"message": "fine"}))

    assert objects.wait_successful(GROUP, VERSION, PLURAL, "good")["status"]["message"] == "fine"
    cond = failure(objects, "evil", "InvalidSpec")
    assert path in cond["message"]
    assert path in warning_event(objects, "evil", "InvalidSpec").message
    assert runs_of(hostile, namespace, "evil") == []
    assert not marker.exists()


def test_a_reserved_key_in_the_status_fails_the_object_and_runs_nothing(
    hostile: OperatorProcess, objects: Objects, namespace: str, tmp_path: Path
) -> None:
    """Whoever may write the status plants the key and a payload there: the next change is refused."""
    marker = tmp_path / "pwned"
    objects.create(GROUP, VERSION, PLURAL, open_obj("target", {"message": "one"}))
    objects.wait_successful(GROUP, VERSION, PLURAL, "target")
    runs = len(runs_of(hostile, namespace, "target"))
    status = {"status": {"note": f"{{{{ lookup('pipe', 'id > {marker}') }}}}", "x": [{"__ansible_unsafe": 1}]}}
    objects.custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "target", status)
    objects.patch(GROUP, VERSION, PLURAL, "target", {"spec": {"message": "two"}})

    cond = failure(objects, "target", "InvalidObject")
    assert "status.x[0].__ansible_unsafe" in cond["message"]
    warning_event(objects, "target", "InvalidObject")
    assert len(runs_of(hostile, namespace, "target")) == runs
    assert not marker.exists()


def _raw(kube: Kube, method: str, path: str, text: str, content_type: str = "application/json") -> None:
    """Send JSON text as it is: the Python client cannot even serialise an object this deep."""
    headers = {"Content-Type": content_type, "Accept": "application/json"}
    kube.api.update_params_for_auth(headers, [], ["BearerToken"], path, method, None)
    response = kube.api.rest_client.pool_manager.request(
        method, kube.api.configuration.host + path, body=text.encode(), headers=headers
    )
    assert response.status < 300, response.data[:500]


def _deep(depth: int) -> str:
    return '{"a":' * depth + '"bottom"' + "}" * depth


@pytest.mark.parametrize("depth", [1_000, 5_000])
def test_a_deep_object_fails_itself_and_the_kind_keeps_reconciling(
    depth: int, hostile: OperatorProcess, objects: Objects, namespace: str, kubeconfig: str
) -> None:
    kube = Kube.connect(kubeconfig)
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    head = json.dumps({"apiVersion": f"{GROUP}/{VERSION}", "kind": "Open", "metadata": {"name": "deep"}})
    _raw(kube, "POST", path, head[:-1] + ',"spec":{"tree":' + _deep(depth) + "}}")
    objects.create(GROUP, VERSION, PLURAL, open_obj("after", {"message": "still here"}))

    resource = kube.resource(GVK(GROUP, VERSION, "Open"))
    wait_until(
        lambda: (condition(kube.get(resource, namespace, "deep"), "Failure") or {}).get("reason") == "InvalidObject",
        60,
        "the deep object refused",
    )
    assert objects.wait_successful(GROUP, VERSION, PLURAL, "after")["status"]["message"] == "still here"
    assert runs_of(hostile, namespace, "deep") == []
    assert "Traceback" not in hostile.log()
    assert hostile.ready()


def test_a_deep_status_written_by_anyone_who_may_patch_it_stops_nothing(
    hostile: OperatorProcess, objects: Objects, namespace: str, kubeconfig: str
) -> None:
    objects.create(GROUP, VERSION, PLURAL, open_obj("target", {"message": "one"}))
    objects.wait_successful(GROUP, VERSION, PLURAL, "target")
    kube = Kube.connect(kubeconfig)
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/target/status"
    _raw(kube, "PATCH", path, '{"status":{"junk":' + _deep(3_000) + "}}", "application/merge-patch+json")

    objects.create(GROUP, VERSION, PLURAL, open_obj("later", {"message": "two"}))
    assert objects.wait_successful(GROUP, VERSION, PLURAL, "later")["status"]["message"] == "two"
    # Its next change makes it run again: refused, on the object, because of what its status holds.
    resource = kube.resource(GVK(GROUP, VERSION, "Open"))
    kube.merge_patch(resource, namespace, "target", {"spec": {"n": 1}})  # the test's client cannot decode it
    wait_until(
        lambda: (condition(kube.get(resource, namespace, "target"), "Failure") or {}).get("reason") == "InvalidObject",
        60,
        "the object with a deep status refused",
    )
    assert hostile.ready()


def test_large_and_strange_objects_run_or_fail_visibly(hostile: OperatorProcess, objects: Objects) -> None:
    strange = "nul\x00 planes \U0001f600 \U000e0001 \U0010fffd \u202e end"
    objects.create(GROUP, VERSION, PLURAL, open_obj("strange", {"message": strange}))
    objects.create(GROUP, VERSION, PLURAL, open_obj("large", {"message": "big", "blob": "x" * 1_400_000}))
    objects.create(GROUP, VERSION, PLURAL, open_obj("odd-keys", {"emoji\U0001f600": 1, "nul\x00key": 2, "ok": 3}))

    assert objects.wait_successful(GROUP, VERSION, PLURAL, "strange")["status"]["message"] == strange
    assert objects.wait_successful(GROUP, VERSION, PLURAL, "large", 120)["status"]["message"] == "big"
    cond = failure(objects, "odd-keys", "InvalidSpec")
    assert repr("emoji\U0001f600") in cond["message"] and repr("nul\x00key") in cond["message"]
    assert "'ok'" not in cond["message"]


@pytest.mark.parametrize(
    ("annotation", "value"),
    [(PERIOD, "1ms"), (PERIOD, "1ns"), (PERIOD, ".inf"), (VERBOSITY, "1000000"), (VERBOSITY, "-1")],
)
def test_annotations_out_of_bounds_fail_the_object_without_a_run(
    annotation: str, value: str, hostile: OperatorProcess, objects: Objects, namespace: str
) -> None:
    objects.create(GROUP, VERSION, PLURAL, open_obj("knob", {"message": "m"}, {annotation: value}))
    cond = failure(objects, "knob", "InvalidAnnotation")
    assert annotation in cond["message"]
    warning_event(objects, "knob", "InvalidAnnotation")
    time.sleep(3)
    assert runs_of(hostile, namespace, "knob") == []

    # Fixing the annotation alone (no new generation) is a change worth a run.
    objects.patch(GROUP, VERSION, PLURAL, "knob", {"metadata": {"annotations": {annotation: "1"}}})
    objects.wait_successful(GROUP, VERSION, PLURAL, "knob")
    assert len(runs_of(hostile, namespace, "knob")) >= 1


def test_a_watch_that_keeps_failing_makes_readyz_fail_with_the_reason(
    operator: Callable[..., OperatorProcess], api: client.ApiClient, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    """An identity that may discover the kind but not list it: the watch fails forever, and says so."""
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token = core.create_namespaced_service_account_token("nobody", namespace, {"spec": {}}).status.token
    admin = yaml.safe_load(Path(kubeconfig).read_text())
    weak = tmp_path / "weak.kubeconfig"
    weak.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": admin["clusters"][0]["cluster"]}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "u", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "u",
            }
        )
    )
    op = operator(WATCHES, env={"KUBECONFIG": str(weak)}, wait_ready=False)

    def says_why() -> str | None:
        code, text = op.http(op.health_port, "/readyz")
        return text if code == 503 and "times in a row" in text else None

    text = wait_until(says_why, 90, "/readyz failing with the watch's reason")
    assert "forbidden" in text.lower() or "403" in text
    assert op.proc.poll() is None
