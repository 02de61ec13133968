"""The wrapper playbooks that run a role: written by the executor into its own new private dir, never
read back from the artifacts dir, where an earlier process (or another user) may have left one."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hybrid_operator.ansible import inputdir
from hybrid_operator.ansible.running import ExecutorSettings, RunRequest, RunSetup
from hybrid_operator.errors import ConfigError

PLANTED = "- hosts: localhost\n  tasks:\n    - ansible.builtin.command: touch /tmp/planted-marker\n"


def request(role: str) -> RunRequest:
    return RunRequest(run_id="r1", group="g", version="v1", kind="K", obj={}, role=role)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[RunSetup]:
    run_setup = RunSetup(ExecutorSettings(artifacts_root=tmp_path / "runner", module_server=False))
    yield run_setup
    run_setup.close()


def test_a_planted_wrapper_in_the_artifacts_dir_is_never_used(tmp_path: Path) -> None:
    # What the operator used to reuse: <artifacts>/.playbooks/<role>.yml, if it existed.
    planted = tmp_path / "runner" / ".playbooks" / "demo.yml"
    planted.parent.mkdir(parents=True, mode=0o700)
    (tmp_path / "runner").chmod(0o700)
    planted.write_text(PLANTED)
    run_setup = RunSetup(ExecutorSettings(artifacts_root=tmp_path / "runner", module_server=False))
    try:
        path = run_setup.playbook_for(request("demo"))
        assert path.read_text() == inputdir.role_playbook("demo")
        assert tmp_path / "runner" not in path.parents
        assert planted.read_text() == PLANTED  # not ours to clean, but never run
    finally:
        run_setup.close()


def test_wrappers_are_private_and_written_once_per_executor(setup: RunSetup) -> None:
    path = setup.playbook_for(request("demo"))
    st = os.lstat(path)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o600)
    assert stat.S_IMODE(os.lstat(path.parent).st_mode) == 0o700
    assert setup.playbook_for(request("demo")) == path
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary files left beside it


def test_roles_whose_names_flatten_alike_get_their_own_wrappers(setup: RunSetup) -> None:
    one, other = setup.playbook_for(request("a/b")), setup.playbook_for(request("a_b"))
    assert one != other
    assert '"a/b"' in one.read_text()
    assert '"a_b"' in other.read_text()


def test_close_removes_the_wrappers(setup: RunSetup) -> None:
    path = setup.playbook_for(request("demo"))
    setup.close()
    assert not path.exists()
    assert not setup.scratch.path.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a dir to another user")
def test_an_artifacts_dir_of_another_user_stops_the_executor_before_it_runs_anything(tmp_path: Path) -> None:
    planted = tmp_path / "runner"
    (planted / ".playbooks").mkdir(parents=True)
    (planted / ".playbooks" / "demo.yml").write_text(PLANTED)
    for path in (planted, planted / ".playbooks", planted / ".playbooks" / "demo.yml"):
        os.chown(path, 65534, 65534)
    before = set(Path(tempfile.gettempdir()).glob(f"hyop-{os.getpid()}-*"))
    with pytest.raises(ConfigError, match=f"runner artifacts dir \\(--runner-artifacts-dir\\) {planted}.*uid 65534"):
        RunSetup(ExecutorSettings(artifacts_root=planted, module_server=False))
    assert set(Path(tempfile.gettempdir()).glob(f"hyop-{os.getpid()}-*")) == before  # nothing made


def test_runs_get_a_private_temp_dir_of_their_own(setup: RunSetup) -> None:
    """Libraries the modules use trust files they find in the temp dir under names anyone can compute
    (kubernetes.core's discovery cache): a run's TMPDIR is this executor's own, private, gone at close."""
    tmp = Path(setup.env["TMPDIR"])
    assert tmp.is_dir() and tmp.parent == setup.scratch.path
    assert stat.S_IMODE(tmp.stat().st_mode) == 0o700
    assert setup.runner_options(request("demo"), setup.scratch.path)["envvars"]["TMPDIR"] == str(tmp)
    setup.close()
    assert not tmp.exists()


def test_a_temp_dir_too_deep_for_unix_sockets_leaves_the_runs_the_operators_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Ansible 2.21 serves its workers over a Unix socket below TMPDIR, and a socket's path has at most 107
    bytes: a private dir that would push it past that must not break every run."""
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    run_setup = RunSetup(ExecutorSettings(artifacts_root=tmp_path / "runner", module_server=False))
    try:
        assert "TMPDIR" not in run_setup.env
        assert "set TMPDIR to a shorter directory" in caplog.text
        assert not (run_setup.scratch.path / "tmp").exists()
    finally:
        run_setup.close()
