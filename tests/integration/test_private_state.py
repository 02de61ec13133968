"""The operator's private state, attacked as another local user would: nothing planted is ever run, and
nothing is left behind.

The attacker (uid 65534, nobody) prepares the artifacts dir before the operator starts, with the wrapper
playbook the operator used to reuse from ``<artifacts>/.playbooks/`` (it ran as the operator's user on
every reconcile, and the object was reported Successful although its role never ran). The planted
playbook touches a marker file: the marker must never appear. The operator must refuse a dir another
user owns (given or default), and in a dir of its own it must run the real role, not what it finds there.
After SIGTERM, none of its temporary dirs (per-run kubeconfigs, executor scratch) may remain.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.integration.conftest import FIXTURES, Objects, OperatorProcess

pytestmark = pytest.mark.integration

G, V, P = "test.hybrid-operator.dev", "v1", "demos"
WATCHES = FIXTURES / "projects" / "demo" / "watches.yaml"
ROLE = FIXTURES / "projects" / "demo" / "roles" / "demo"  # watches.yaml names it; it resolves to this path
NOBODY = 65534
TEMP_DIR_PREFIXES = ("hybrid-operator-runs-", "hyop-")


def demo(name: str) -> dict[str, object]:
    return {"apiVersion": f"{G}/{V}", "kind": "Demo", "metadata": {"name": name}, "spec": {"message": "hi"}}


def plant(artifacts: Path, marker: Path, owner: int | None) -> Path:
    """The wrapper playbook the operator used to reuse if it existed, with a payload of the attacker's."""
    playbook = artifacts / ".playbooks" / f"{str(ROLE).strip('/').replace('/', '_')}.yml"
    playbook.parent.mkdir(parents=True)
    playbook.write_text(
        "---\n"
        "- name: Planted\n"
        "  hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: Leave a mark\n"
        "      ansible.builtin.file:\n"
        f"        path: {marker}\n"
        "        state: touch\n"
        "        mode: '0644'\n"
    )
    if owner is not None:
        give_away(artifacts, owner)
    return playbook


def give_away(top: Path, owner: int) -> None:
    """Make ``top`` and everything in it the attacker's, writable by anyone (as nobody would leave it)."""
    for path in [top, *top.rglob("*")]:
        os.chown(path, owner, owner)
        path.chmod(0o777)


def private_tmpdir(tmp_path: Path) -> Path:
    """A TMPDIR of the test's own (mode 0700), short enough for the runs' Unix sockets: a pytest-xdist
    worker's tmp_path is too deep for them (the operator would refuse to start, rightly). Linked from
    tmp_path, and removed with it."""
    tmpdir = Path(tempfile.mkdtemp(prefix="hyop-"))
    (tmp_path / "tmp").symlink_to(tmpdir)
    atexit.register(shutil.rmtree, tmpdir, True)
    return tmpdir


def exit_code(op: OperatorProcess, timeout: float = 120) -> int:
    return op.proc.wait(timeout)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="plays the attacker with chown: needs root")


@needs_root
def test_an_artifacts_dir_planted_by_another_user_stops_the_operator(
    operator, objects: Objects, tmp_path: Path
) -> None:
    marker = tmp_path / "planted-playbook-ran"
    planted = tmp_path / "planted"
    plant(planted, marker, owner=NOBODY)
    objects.create(G, V, P, demo("victim"))
    op = operator(WATCHES, "--runner-artifacts-dir", str(planted), wait_ready=False)
    assert exit_code(op) == 2, op.log()
    log = op.log()
    assert f"refusing to use runner artifacts dir (--runner-artifacts-dir) {planted}: it belongs to uid {NOBODY}" in log
    assert "give a directory of your own" in log
    assert not marker.exists()
    assert "status" not in (objects.get(G, V, P, "victim") or {})  # nothing was run for it


@needs_root
@pytest.mark.parametrize("level", ["runner", "parent"])
def test_the_default_artifacts_dir_planted_by_another_user_stops_the_operator(
    operator, objects: Objects, tmp_path: Path, level: str
) -> None:
    """The default is per user (``$TMPDIR/hybrid-operator-<uid>/runner``); nobody guesses it and plants the
    whole tree, or only the per-user dir (to swap ``runner`` later): refused either way."""
    tmpdir = private_tmpdir(tmp_path)
    user_dir = tmpdir / f"hybrid-operator-{os.geteuid()}"
    marker = tmp_path / "planted-playbook-ran"
    if level == "runner":
        plant(user_dir / "runner", marker, owner=None)
    else:
        user_dir.mkdir()
    give_away(user_dir, NOBODY)
    objects.create(G, V, P, demo("victim"))
    op = operator(WATCHES, env={"TMPDIR": str(tmpdir)}, default_artifacts=True, wait_ready=False)
    assert exit_code(op) == 2, op.log()
    log = op.log()
    assert f"refusing to use runner artifacts dir (--runner-artifacts-dir) {user_dir / 'runner'}" in log
    assert f"belongs to uid {NOBODY}" in log
    assert not marker.exists()
    assert not (user_dir / "runner").exists() or level == "runner"  # nothing made in the attacker's dir
    assert "status" not in (objects.get(G, V, P, "victim") or {})


@pytest.mark.parametrize("executor", ["warm", "runner"])
def test_a_wrapper_playbook_found_in_our_own_artifacts_dir_is_never_run(
    operator, objects: Objects, tmp_path: Path, executor: str
) -> None:
    artifacts = tmp_path / "ours"
    artifacts.mkdir(mode=0o700)
    marker = tmp_path / "planted-playbook-ran"
    planted = plant(artifacts, marker, owner=None)
    operator(WATCHES, "--runner-artifacts-dir", str(artifacts), "--executor", executor)
    objects.create(G, V, P, demo("victim"))
    obj = objects.wait_successful(G, V, P, "victim", 90)
    assert obj["status"]["echoed"] == "hi"  # written by the real role, which the planted playbook is not
    assert not marker.exists()
    assert "Leave a mark" in planted.read_text()  # left alone, and never run


@pytest.mark.parametrize("executor", ["warm", "runner"])
def test_no_temporary_dir_outlives_the_operator(operator, objects: Objects, tmp_path: Path, executor: str) -> None:
    tmpdir = private_tmpdir(tmp_path)
    op = operator(WATCHES, "--executor", executor, env={"TMPDIR": str(tmpdir)})
    objects.create(G, V, P, demo("one"))
    objects.wait_successful(G, V, P, "one", 90)
    pid = op.proc.pid
    ours = re.compile(rf"^(hybrid-operator-runs-|hyop-|hyop-warm-){pid}-")
    while_running = sorted(p.name for p in tmpdir.iterdir() if ours.match(p.name))
    assert any(name.startswith(f"hybrid-operator-runs-{pid}-") for name in while_running), while_running
    assert any(name.startswith(f"hyop-{pid}-") for name in while_running), while_running
    if executor == "warm":
        assert any(name.startswith(f"hyop-warm-{pid}-") for name in while_running), while_running
    for name in while_running:
        mode = (tmpdir / name).stat().st_mode & 0o777
        assert mode == 0o700, f"{name}: {mode:o}"
    assert op.terminate() == 0
    left = sorted(p.name for p in tmpdir.iterdir() if p.name.startswith(TEMP_DIR_PREFIXES))
    assert left == [], f"left behind in TMPDIR: {left}; all there is: {sorted(os.listdir(tmpdir))}"
