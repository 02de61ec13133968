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
from hybrid_operator.ansible.compat import ansible_version
from hybrid_operator.ansible.extravars import dump
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
    payload = touch(marker)
    result = executor.run(request(attack, attacks(payload)[attack]))
    assert not marker.exists()
    if ansible_version()[:2] < (2, 19) and result.succeeded:
        # 2.18's decoder takes these keys as its own (``{"__ansible_unsafe": 1}`` is the 1) and never
        # raises: the file was read as JSON, every string of the resource data.
        assert result.status["echoed"] == ("" if attack.startswith("status") else payload)
        return
    # Ansible cannot read the file as JSON (the key) nor as YAML (the format): the run fails before a task.
    assert not result.succeeded
    assert result.ok == 0


def not_json(text: str) -> str:
    """The extra-vars text with a trailing comma: what any decoder refuses, a reason independent of keys (the
    only kind 2.18's decoder has), and what YAML still reads."""
    assert text.rstrip().endswith("}")
    return text.rstrip()[:-1] + ",}"


def test_a_file_the_decoder_refuses_for_any_reason_is_refused_whole(
    executor: Executor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "pwned"
    monkeypatch.setattr(inputdir, "dump_extravars", lambda variables: not_json(dump(variables)))
    result = executor.run(request("not-json", {"spec": {"message": touch(marker)}}))
    assert not marker.exists()
    assert not result.succeeded and result.ok == 0


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
    """The defence switched off (the JSON of before, which YAML can read): the marker appears. On 2.18, whose
    decoder raises on no key, with a file it refuses for another reason (``not_json``)."""
    marker = tmp_path / "pwned"
    before = not_json if ansible_version()[:2] < (2, 19) else str
    monkeypatch.setattr(inputdir, "dump_extravars", lambda variables: before(json.dumps(variables, default=str)))
    executor.run(request("old-format", attacks(touch(marker))["spec-map"]))
    assert marker.exists()
