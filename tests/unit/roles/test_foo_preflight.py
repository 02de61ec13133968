"""The foo role's checks of what it is given (``roles/foo/tasks/preflight.yml``: one task for every check),
run by a real ``ansible-playbook`` with the extra vars as the operator passes them (its file, every string
marked unsafe): each bad input fails the run with its own message, and a value that looks like a template is
shown, never run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.extravars import dump
from hybrid_operator.ansible.inputdir import mark_unsafe

ROOT = Path(__file__).resolve().parents[3]
PREFLIGHT = ROOT / "roles" / "foo" / "tasks" / "preflight.yml"


def _valid(**spec: Any) -> dict[str, Any]:
    return {
        "ansible_operator_meta": {"name": "web", "namespace": "team-a"},
        "_samplecontroller_k8s_io_foo": {"metadata": {"uid": "u-1"}},
        "deployment_name": "web",
        "replicas": 3,
        **spec,
    }


def _run(tmp_path: Path, extra: dict[str, Any]) -> tuple[int, str]:
    play = tmp_path / "play.yml"
    play.write_text(
        f"- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.import_tasks: {PREFLIGHT}\n"
    )
    (tmp_path / "extra.json").write_text(dump(mark_unsafe(extra)))
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            "localhost,",
            "-c",
            "local",
            str(play),
            "-e",
            f"@{tmp_path / 'extra.json'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp")},
    )
    return done.returncode, done.stdout + done.stderr


def test_a_valid_foo_passes_in_one_task(tmp_path: Path) -> None:
    rc, out = _run(tmp_path, _valid())
    assert rc == 0, out
    assert "ok=1 " in out and "failed=0" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"deployment_name": "web", "replicas": 1}, "The foo role needs the extra vars the operator sets"),
        (_valid(ansible_operator_meta={"name": "x" * 64, "namespace": "a"}), 'at most 63 characters; \\"xxx'),
        (_valid(deployment_name="Web_1"), "DNS-1123 label: 1 to 63 lower-case letters"),
        (_valid(deployment_name=7), "got 7."),
        (_valid(replicas=11), "spec.replicas must be an integer from 1 to 10, got 11."),
        (_valid(replicas="3"), 'spec.replicas must be an integer from 1 to 10, got \\"3\\".'),
    ],
    ids=["no-meta", "long-name", "bad-deployment-name", "number-as-name", "too-many-replicas", "string-replicas"],
)
def test_each_bad_input_fails_with_its_own_message(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    rc, out = _run(tmp_path, extra)
    assert rc == 2, out
    assert message in out, out


def test_a_value_that_looks_like_a_template_is_shown_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    hostile = f"{{{{ lookup('ansible.builtin.pipe', 'touch {marker}') }}}}"
    rc, out = _run(tmp_path, _valid(deployment_name=hostile))
    assert rc == 2, out
    assert "lookup(" in out and "DNS-1123" in out
    assert not marker.exists()
