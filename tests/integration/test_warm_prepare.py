"""What the warm executor's zygote prepares for its runs besides the roles path: the roles watches.yaml names
by their path (``ExecutorSettings.prepared_dirs``), their YAML parsed and their modules' payloads built once.
A real zygote, real Ansible; the run's outcome is the same whether its role was prepared or not."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

from hybrid_operator.ansible.running import ExecutorSettings
from hybrid_operator.ansible.warm.executor import WarmExecutor
from tests.integration.test_warm_executor import ROLES, outcome, request


def _run_by_path(tmp_path: Path, prepared: tuple[Path, ...]) -> tuple[dict[str, object], str]:
    """A run of the ``warm`` role named by its path, on an executor with no roles path; its outcome and the
    zygote's log once the payload builder (if any) has said what it did."""
    settings = ExecutorSettings(artifacts_root=tmp_path, prepared_dirs=prepared)  # modules in the workers
    warm = WarmExecutor(settings)
    try:
        result = warm.run(replace(request(spec={"x": 1}), role=str(ROLES / "warm")))
        assert result.succeeded and result.status["x"] == "1"
        log = warm.home / "zygote.log"
        deadline = time.monotonic() + 60
        while prepared and "module payloads prepared" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        return outcome(result), log.read_text()
    finally:
        warm.close()


def _count(pattern: str, log: str) -> int:
    found = re.search(pattern, log)
    assert found is not None, log
    return int(found.group(1))


def test_roles_named_by_path_are_prepared_and_their_runs_are_the_same(tmp_path: Path) -> None:
    plain, plain_log = _run_by_path(tmp_path / "plain", ())
    prepared, prepared_log = _run_by_path(tmp_path / "prepared", (ROLES / "warm", ROLES / "modules", ROLES))
    assert _count(r"zygote: (\d+) role files parsed", plain_log) == 0  # nothing on a roles path
    # Each role once, though named twice (by its path and under the directory of roles).
    assert _count(r"zygote: (\d+) role files parsed", prepared_log) == len(list(ROLES.glob("*/*/*.yml")))
    # command, copy, stat and kubernetes.core.k8s_info of the ``modules`` role, at least.
    assert _count(r"zygote: (\d+) module payloads prepared", prepared_log) >= 4
    assert "did not build" not in prepared_log
    assert prepared["status"] == plain["status"] and prepared["counts"] == plain["counts"]
    assert prepared["events"] == plain["events"]
