"""A resource's data reaches Ansible as data, whatever keys it holds: both executors, real Ansible.

The reactor's admission refuses keys such as ``__ansible_unsafe`` anywhere in an object; these tests go
around it on purpose and hand hostile objects straight to ``RunnerExecutor`` and ``WarmExecutor``, so
what they prove is the second defence alone: the extra-vars file (``ansible.extravars``) can only be read
as the data we meant. Each attack puts a Jinja payload that touches a marker file beside a key that once
made Ansible's JSON decoder raise and read the whole file as YAML, trusting every string; the marker must
never appear. The last test writes the file the old way and sees the marker, so these tests can fail.
Run by CI for every supported ansible-core minor (``hack/test-matrix.sh``); no cluster needed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import inputdir
from hybrid_operator.ansible.results import RunResult
from hybrid_operator.ansible.running import Executor, ExecutorSettings, RunnerExecutor, RunRequest
from hybrid_operator.ansible.warm.executor import WarmExecutor

pytestmark = pytest.mark.integration
ROLES = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "untrusted" / "roles"
GROUP, VERSION, KIND = "test.hybrid-operator.dev", "v1", "Untrusted"


def attacks(payload: str) -> dict[str, dict[str, Any]]:
    """Where the hostile key sits; the payload is a string of the spec or the status beside it."""
    return {
        "spec-map": {"spec": {"message": payload, "extra": {"a": {"__ansible_unsafe": 1}}}},
        "spec-list": {"spec": {"message": payload, "entries": [{"a": 1}, [{"__ansible_unsafe": None}]]}},
        "string-map": {"spec": {"message": payload, "podLabels": {"app": "x", "__ansible_type": "x"}}},
        "vault": {"spec": {"message": payload, "extra": {"__ansible_vault": 1}}},
        "status": {"spec": {}, "status": {"phase": payload, "x": {"__ansible_unsafe": 1}}},
        "status-only-payload": {"spec": {"extra": {"__ansible_unsafe": []}}, "status": {"note": payload}},
    }


def request(name: str, body: dict[str, Any]) -> RunRequest:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    obj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": meta, **body}
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": name, "namespace": "ns"}
    return RunRequest(
        run_id=uuid.uuid4().hex[:12],
        group=GROUP,
        version=VERSION,
        kind=KIND,
        obj=obj,
        role="untrusted",
        env={"HYBRID_OPERATOR_OWNER": json.dumps(owner)},
        max_artifacts=2,
    )


@pytest.fixture(scope="module", params=["runner", "warm"])
def executor(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    settings = ExecutorSettings(
        artifacts_root=tmp_path_factory.mktemp(request.param), roles_paths=(ROLES,), module_server=False
    )
    if request.param == "warm":
        warm = WarmExecutor(settings)
        warm.wait_until_ready()
        assert warm.off == ""  # the forked path itself is under test
        yield warm
        warm.close()
    else:
        runner = RunnerExecutor(settings)
        yield runner
        runner.close()


def touch(marker: Path) -> str:
    return "{{ lookup('ansible.builtin.pipe', 'touch " + str(marker) + "') }}"


@pytest.mark.parametrize("attack", sorted(attacks("")))
def test_a_reserved_key_anywhere_never_makes_the_resource_a_template(
    attack: str, executor: Executor, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    result = executor.run(request(attack, attacks(touch(marker))[attack]))
    assert not marker.exists()
    # Ansible cannot read the file as JSON (the key) nor as YAML (the format): the run fails before a task.
    assert not result.succeeded
    assert result.ok == 0


def test_templates_in_the_data_stay_text_and_the_run_succeeds(executor: Executor, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = touch(marker)
    body = {
        "spec": {"message": payload, "extra": {"a": [payload]}, "podLabels": {"k": payload}},
        "status": {"phase": payload},
    }
    result: RunResult = executor.run(request("clean", body))
    assert result.succeeded, result.error
    assert result.status["echoed"] == payload
    assert not marker.exists()


def test_the_same_attack_with_the_old_file_format_runs_the_payload(
    executor: Executor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The defence switched off (the JSON of before, which YAML can read): the marker appears."""
    marker = tmp_path / "pwned"
    monkeypatch.setattr(inputdir, "dump_extravars", lambda variables: json.dumps(variables, default=str))
    executor.run(request("old-format", attacks(touch(marker))["spec-map"]))
    assert marker.exists()
