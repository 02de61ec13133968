"""What the warm executor's zygote prepares for its runs besides the roles path: the roles watches.yaml names
by their path (``ExecutorSettings.prepared_dirs``), their YAML parsed and their modules' payloads built once.
A real zygote, real Ansible; the run's outcome is the same whether its role was prepared or not."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hybrid_operator.ansible.compat import ansible_version
from hybrid_operator.ansible.running import ExecutorSettings
from hybrid_operator.ansible.warm import payloads
from hybrid_operator.ansible.warm.executor import WarmExecutor
from tests.integration.test_warm_executor import ROLES, outcome, request
from tests.paths import LEAN_MINOR


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


@pytest.fixture(autouse=True)
def _payload_builder_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product's default, whatever the suite's environment says (hack/test.sh turns it off for the other
    integration tests: each of their hundreds of operator starts would build payloads it mostly never runs)."""
    monkeypatch.delenv(payloads.DISABLE_ENV, raising=False)


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


def test_a_role_holding_a_template_that_does_not_compile_leaves_the_warm_path_on(tmp_path: Path) -> None:
    """A task never run, or a role of a version not deployed (Kiali's ``roles/<version>/...``), may hold a
    source that does not compile: the zygote prepares the rest and the runs stay warm."""
    roles = tmp_path / "roles"
    broken = roles / "v1.0" / "broken" / "tasks"
    broken.mkdir(parents=True)
    (broken / "main.yml").write_text(
        '- name: never run\n  ansible.builtin.debug:\n    msg: "{{ x + }}"\n  when: "y +"\n', encoding="utf-8"
    )
    (roles / "v1.0" / "broken" / "templates").mkdir()
    (roles / "v1.0" / "broken" / "templates" / "t.j2").write_text("{% if %}\n", encoding="utf-8")
    settings = ExecutorSettings(artifacts_root=tmp_path / "artifacts", prepared_dirs=(roles, ROLES / "warm"))
    warm = WarmExecutor(settings)
    try:
        warm.wait_until_ready()
        assert warm.off == ""  # the warm path stayed on
        log = (warm.home / "zygote.log").read_text()
        assert _count(r"zygote: (\d+) role files parsed", log) == 2  # the nested role and the run's own
        result = warm.run(replace(request(spec={"x": 2}), role=str(ROLES / "warm")))
        assert result.succeeded and result.status["x"] == "2"
        # The role named by its path is loaded ahead too (``warm.plays``, where the lean path runs).
        assert result.loaded_ahead == (ansible_version()[:2] >= LEAN_MINOR)
    finally:
        warm.close()
