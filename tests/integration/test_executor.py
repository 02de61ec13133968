"""The ansible-runner executor on its own (real ansible-runner, no cluster): secrets passed in the run's
environment never reach the artifacts, and artifacts stay within their bounds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from hybrid_operator.ansible.executors import build_executor
from hybrid_operator.ansible.running import ExecutorSettings, RunnerExecutor, RunRequest
from hybrid_operator.settings.config import Config, add_run_flags

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


@pytest.fixture
def vaulted_role(tmp_path: Path) -> tuple[Path, Path]:
    """A role whose vars file is vault-encrypted, and the password file that opens it."""
    from ansible.parsing.vault import VaultLib, VaultSecret

    password = tmp_path / "pwd.yml"
    password.write_text("open-sesame\n")
    vault = VaultLib([("default", VaultSecret(b"open-sesame"))])
    role = tmp_path / "roles" / "vaulted"
    (role / "tasks").mkdir(parents=True)
    (role / "vars").mkdir()
    (role / "vars" / "main.yml").write_bytes(vault.encrypt(b"vaulted_word: opened\n"))
    (role / "tasks" / "main.yml").write_text(
        "---\n- name: Read the vaulted var\n  ansible.builtin.assert:\n    that: vaulted_word == 'opened'\n"
    )
    return role, password


@pytest.mark.parametrize("executor_kind", ["runner", "warm"])
def test_ansible_args_quoted_as_operator_sdks_manifests_quote_them(
    tmp_path: Path, vaulted_role: tuple[Path, Path], executor_kind: str
) -> None:
    """``--ansible-args='--vault-password-file FILE'``, the quotes inside the argument: both executors run."""
    role, password = vaulted_role
    parser = argparse.ArgumentParser()
    add_run_flags(parser)
    args = parser.parse_args(
        [
            f"--ansible-args='--vault-password-file {password}'",
            "--module-server=false",
            f"--executor={executor_kind}",
            f"--runner-artifacts-dir={tmp_path / 'art'}",
        ]
    )
    config = Config.from_args(args, env={})
    executor = build_executor(config)
    try:
        result = executor.run(request(role, "run1"))
        assert getattr(executor, "off", "") == "", "the warm executor stayed on"
    finally:
        executor.close()
    assert result.succeeded, result.failure_message


def test_refused_ansible_args_report_the_parsers_error(tmp_path: Path, role: Path) -> None:
    settings = ExecutorSettings(artifacts_root=tmp_path / "art", module_server=False, ansible_args="--no-such-flag")
    executor = RunnerExecutor(settings)
    try:
        result = executor.run(request(role, "run1"))
    finally:
        executor.close()
    assert not result.succeeded
    assert result.error == "ansible-playbook: error: unrecognized arguments: --no-such-flag"


def test_a_warm_up_refused_by_the_command_line_says_why(tmp_path: Path, role: Path) -> None:
    from hybrid_operator.ansible.warm.executor import WarmExecutor

    settings = ExecutorSettings(artifacts_root=tmp_path / "art", module_server=False, ansible_args="--no-such-flag")
    executor = WarmExecutor(settings)
    try:
        result = executor.run(request(role, "run1"))
        off = executor.off
    finally:
        executor.close()
    assert "ansible-playbook: error: unrecognized arguments: --no-such-flag" in off
    assert result.error == "ansible-playbook: error: unrecognized arguments: --no-such-flag"
