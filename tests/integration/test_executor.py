"""The ansible-runner executor on its own (real ansible-runner, no cluster): secrets passed in the run's
environment never reach the artifacts, and artifacts stay within their bounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hybrid_operator.ansible.running import ExecutorSettings, RunnerExecutor, RunRequest

pytestmark = pytest.mark.integration
SECRET = "s3cr3t-Pa55w0rd-that-must-not-leak"


@pytest.fixture
def role(tmp_path: Path) -> Path:
    tasks = tmp_path / "roles" / "envuser" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(
        "---\n"
        "- name: Use the secret without printing it\n"
        "  ansible.builtin.assert:\n"
        "    that: lookup('env', 'APP_TOKEN') | length > 10\n"
        "    quiet: true\n"
    )
    return tasks.parent


def request(role: Path, run_id: str, name: str = "obj") -> RunRequest:
    obj = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": name, "namespace": "ns"}, "spec": {}}
    return RunRequest(
        run_id=run_id,
        group="example.com",
        version="v1",
        kind="Thing",
        obj=obj,
        role=str(role),
        env={"APP_TOKEN": SECRET},
        max_artifacts=3,
    )


@pytest.mark.parametrize("module_server", [False, True], ids=["stock", "module-server"])
def test_secrets_in_env_stay_out_of_artifacts(tmp_path: Path, role: Path, module_server: bool) -> None:
    executor = RunnerExecutor(ExecutorSettings(artifacts_root=tmp_path / "art", module_server=module_server))
    try:
        result = executor.run(request(role, "run1"))
    finally:
        executor.close()
    assert result.succeeded, result.failure_message
    files = [p for p in (tmp_path / "art").rglob("*") if p.is_file()]
    assert any(p.name == "command" for p in files), "the command artifact is kept, scrubbed"
    for path in files:
        assert SECRET not in path.read_text(errors="replace"), f"secret found in {path}"
    command = next(p for p in files if p.name == "command")
    assert "APP_TOKEN" in json.loads(command.read_text())["env"]  # names stay, values go


def test_artifacts_are_kept_per_object_up_to_the_limit(tmp_path: Path, role: Path) -> None:
    executor = RunnerExecutor(ExecutorSettings(artifacts_root=tmp_path / "art", module_server=False))
    try:
        for i in range(5):
            assert executor.run(request(role, f"r{i}")).succeeded
    finally:
        executor.close()
    runs = sorted((tmp_path / "art" / "example.com" / "v1" / "Thing" / "ns" / "obj").iterdir())
    assert [p.name.rsplit("-", 1)[1] for p in runs] == ["r2", "r3", "r4"]
