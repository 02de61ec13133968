"""The zygote's spare (``warm.spares``) on real Ansible (no cluster needed): the next run's child, forked
while no run runs, takes the next run; a run in it gives what a freshly forked run gives; a spare that died
is replaced and its run forked afresh; closing the executor leaves no spare behind; the switch turns it off.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hybrid_operator.ansible.running import ExecutorSettings
from hybrid_operator.ansible.warm import spares
from hybrid_operator.ansible.warm.executor import WarmExecutor
from tests.integration.faults import running
from tests.integration.test_warm_executor import ROLES, outcome, request

pytestmark = pytest.mark.integration


def _stat(pid: int) -> list[str]:
    return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def waiting_spares(zygote: int) -> list[int]:
    """The zygote's children that lead a session of their own (a run's child or a spare) and sleep."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat(int(entry.name))
        except OSError:  # gone meanwhile
            continue
        state, ppid, session = fields[0], int(fields[1]), int(fields[3])
        if ppid == zygote and session == int(entry.name) and state == "S":
            found.append(int(entry.name))
    return found


def one_spare(zygote: int, timeout: float = 30.0) -> int:
    """The zygote's one waiting spare (it is forked once no run runs)."""
    deadline = time.monotonic() + timeout
    while len(found := waiting_spares(zygote)) != 1:
        if time.monotonic() > deadline:
            raise AssertionError(f"not one waiting spare: {found}")
        time.sleep(0.05)
    return found[0]


def _gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _executor(root: Path) -> WarmExecutor:
    executor = WarmExecutor(ExecutorSettings(artifacts_root=root, roles_paths=(ROLES,), module_server=False))
    executor.wait_until_ready()
    assert executor.off == ""
    return executor


@pytest.fixture
def with_spares(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WarmExecutor]:
    monkeypatch.delenv(spares.DISABLE_ENV, raising=False)
    executor = _executor(tmp_path / "spares")
    yield executor
    executor.close()


def test_the_next_run_goes_to_the_spare_and_gives_what_a_fresh_fork_gives(
    with_spares: WarmExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zygote = with_spares.zygote_pid
    assert zygote is not None
    monkeypatch.setenv(spares.DISABLE_ENV, "0")
    fresh = _executor(tmp_path / "fresh")
    try:
        assert fresh.zygote_pid is not None
        for spec in ({"x": 1}, {"mode": "fail", "x": 2}, {"mode": "rescued", "x": "three"}):
            spare = one_spare(zygote)
            result = with_spares.run(request(spec=spec))
            assert _gone(spare)  # the spare became this run and ended with it
            assert outcome(result) == outcome(fresh.run(request(spec=spec)))
        assert waiting_spares(fresh.zygote_pid) == []  # switched off: nothing waits
    finally:
        fresh.close()
    assert one_spare(zygote)  # and the next one is ready


def test_a_spare_that_died_is_replaced_and_its_run_forked_afresh(with_spares: WarmExecutor) -> None:
    zygote = with_spares.zygote_pid
    assert zygote is not None
    spare = one_spare(zygote)
    os.kill(spare, signal.SIGKILL)
    assert _gone(spare)  # dead (a zombie until the zygote reaps it) before the run is asked for
    result = with_spares.run(request(spec={"x": 5}))
    assert result.succeeded and result.status["x"] == "5"
    assert with_spares.ready() == (True, "ok") and with_spares.zygote_pid == zygote
    assert one_spare(zygote)


def test_closing_the_executor_leaves_no_spare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(spares.DISABLE_ENV, raising=False)
    executor = _executor(tmp_path)
    zygote = executor.zygote_pid
    assert zygote is not None
    spare = one_spare(zygote)
    executor.close()
    assert _gone(spare) and _gone(zygote)


def test_a_spare_whose_zygote_was_killed_exits_by_itself(with_spares: WarmExecutor) -> None:
    # Only the zygote holds the write end of a spare's pipe: killed (-9, no clean-up of its own), the spare
    # reads end of file and exits instead of waiting for a run that cannot come.
    zygote = with_spares.zygote_pid
    assert zygote is not None
    spare = one_spare(zygote)
    os.kill(zygote, signal.SIGKILL)
    assert _gone(spare)
