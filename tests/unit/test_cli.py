"""``hybrid-operator run`` and ``reconcile`` stop with exit code 2 and one line saying why, never a traceback."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from hybrid_operator.cli import main

ROOT = Path(__file__).resolve().parents[2]
QUIET = ["--health-probe-bind-address=0", "--metrics-bind-address=0", "--user-metrics-bind-address=0"]


@pytest.fixture(autouse=True)
def _nowhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No kubeconfig anywhere and no pod around us."""
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    # The client library read KUBECONFIG into its default path when it was imported (hack/test.sh sets it
    # to the test bed): without this the operator would find the bed and run instead of stopping.
    monkeypatch.setattr("kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "none"))


def run(*flags: str) -> int:
    return main(["run", f"--watches-file={ROOT / 'watches.yaml'}", *QUIET, *flags])


def test_no_api_server_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run() == 2
    err = capsys.readouterr().err
    assert "not in a cluster" in err and "Traceback" not in err


def test_rbac_without_tls_stops_the_start(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--metrics-require-rbac") == 2
    assert "--metrics-require-rbac needs --metrics-secure" in capsys.readouterr().err


def test_sharding_with_leader_election_stops_the_start(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--sharding", "--leader-elect") == 2
    err = capsys.readouterr().err
    assert "--sharding and --leader-elect exclude each other" in err and "Traceback" not in err


def test_ignored_zap_flags_are_named_in_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--zap-devel", "--zap-time-encoding=epoch") == 2
    err = capsys.readouterr().err
    assert "--zap-devel is accepted for operator-sdk compatibility and has no effect" in err
    assert "--zap-time-encoding is accepted" in err


def test_reconcile_refuses_the_alias_bomb_in_one_line_and_quickly(tmp_path: Path) -> None:
    """The whole process: before the bounded reader, this file kept a core busy until it was killed."""
    from tests.unit.reactor.test_oneshot import alias_bomb

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    watches = f"--watches-file={ROOT / 'watches.yaml'}"
    command = [sys.executable, "-m", "hybrid_operator", "reconcile", str(bomb), watches]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False)
    elapsed = time.monotonic() - start
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")
    assert "anchors and aliases (&name, *name) are not allowed at spec.a" in done.stderr
    # The interpreter and the package's imports take most of this; the refusal itself is milliseconds.
    assert elapsed < 10, f"{elapsed:.1f}s"


def test_reconcile_reads_the_file_with_bounds_before_anything_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.reactor.test_oneshot import alias_bomb

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    start = time.monotonic()
    assert main(["reconcile", str(bomb), "--watches-file=/nonexistent/watches.yaml"]) == 2
    assert time.monotonic() - start < 1.0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "anchors and aliases" in err
