"""Fixtures of the real-node tests: kubectl against the bed, and the real node itself (or a skip).

These tests need a bed with a real node (``hack/local-cluster.sh up --real-node``, root on Debian) and the
operator image loaded into it (``hack/local-cluster.sh load build/images/hybrid-operator.oci.tar
hybrid-operator:latest``); ``hack/test-realnode.sh`` (hack/test.sh's real-node step) does both.
Everything is real: the kubelet runs containers with runc, images come from containerd, Services go
through kube-proxy's iptables rules. On any other cluster they are skipped, saying why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL_NODE_LABEL = "hybrid-operator.local/real-node"

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def _kubectl_binary() -> str:
    """The bed's own kubectl (what `hack/local-cluster.sh env` puts first on PATH), else any on PATH."""
    env = subprocess.run([str(ROOT / "hack" / "local-cluster.sh"), "env"], capture_output=True, text=True, check=False)
    for line in env.stdout.splitlines():
        if line.startswith("export PATH="):
            candidate = Path(line.removeprefix("export PATH=").split(":")[0]) / "kubectl"
            if candidate.exists():
                return str(candidate)
    found = shutil.which("kubectl")
    if not found:
        pytest.skip("no kubectl: build the test bed (hack/local-cluster.sh build)")
    return found


@pytest.fixture(scope="session")
def kubectl(kubeconfig: str) -> Kubectl:
    binary = _kubectl_binary()

    def run(
        *args: str, check: bool = True, timeout: float = 120, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [binary, "--kubeconfig", kubeconfig, *args],
            capture_output=True,
            text=True,
            input=stdin,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}")
        return proc

    return run


def get_json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", "-o", "json", *args).stdout)


@pytest.fixture(scope="session")
def real_node(kubectl: Kubectl) -> dict[str, Any]:
    """The bed's real node, Ready; a skip on a cluster without one."""
    nodes = get_json(kubectl, "nodes", "-l", f"{REAL_NODE_LABEL}=true")["items"]
    if not nodes:
        pytest.skip("no real node in this cluster: hack/local-cluster.sh up --real-node (root, Debian)")
    node: dict[str, Any] = nodes[0]
    ready = [c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready == ["True"], f"the real node {node['metadata']['name']} is not Ready: {node['status']['conditions']}"
    return node
