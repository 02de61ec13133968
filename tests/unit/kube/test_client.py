"""Kube.connect with a kubeconfig it cannot use: one ConfigError naming the file, never the client's traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes.config import kube_config

from hybrid_operator.errors import ConfigError
from hybrid_operator.kube.client import Kube

ROOT = Path(__file__).resolve().parents[3]

KUBECONFIGS: dict[str, str | bytes] = {
    "not-yaml": "clusters: [unclosed\n",
    "not-utf8": b"\xff\xfe\x00",
    "a-list": "- a\n- b\n",
    "empty-mapping": "{}\n",
    "deep": "[" * 5000,
    "no-such-context": "apiVersion: v1\ncurrent-context: nowhere\ncontexts: []\nclusters: []\nusers: []\n",
    "contexts-not-a-list": "current-context: c\ncontexts: 5\n",
}


@pytest.mark.parametrize("name", sorted(KUBECONFIGS))
def test_an_unusable_kubeconfig_is_one_config_error(tmp_path: Path, name: str) -> None:
    path = tmp_path / "kubeconfig"
    content = KUBECONFIGS[name]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigError, match=f"^cannot use kubeconfig {path}: ") as caught:
        Kube.connect(str(path))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("where", ["missing", "directory"])
def test_a_kubeconfig_that_is_not_a_file(tmp_path: Path, where: str) -> None:
    path = tmp_path / "nothing" if where == "missing" else tmp_path
    with pytest.raises(ConfigError, match=f"^cannot use kubeconfig {path}: "):
        Kube.connect(str(path))


def test_no_kubeconfig_outside_a_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "config"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(ConfigError, match=r"no usable kubeconfig .* and not in a cluster .*: set --kubeconfig"):
        Kube.connect(None)


def test_run_with_a_bad_kubeconfig_exits_2_with_one_line(tmp_path: Path) -> None:
    """The whole command, as a person runs it: exit code 2 and one error line, no traceback."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [unclosed\n", encoding="utf-8")
    argv = ["run", "--kubeconfig", str(kubeconfig), "--metrics-bind-address", "0", "--health-probe-bind-address", "0"]
    argv += ["--user-metrics-bind-address", "0"]  # another operator on this machine may hold localhost:5050
    proc = subprocess.run(
        [sys.executable, "-m", "hybrid_operator", *argv, "--watches-file", str(ROOT / "watches.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert f"cannot use kubeconfig {kubeconfig}: " in line
    assert line == proc.stderr.splitlines()[-1]
