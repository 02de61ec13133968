"""Session fixtures shared by every integration test: a real Kubernetes API server.

``kubeconfig`` uses the cluster in ``KUBECONFIG`` when the user points at one of their own (kind, say),
unless ``HYBRID_OPERATOR_TESTBED=local`` forces the project's own test bed; otherwise it brings the local
test bed up with ``hack/local-cluster.sh up`` (built from source on first use, then cached).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    own = os.environ.get("KUBECONFIG")
    if own and os.environ.get("HYBRID_OPERATOR_TESTBED") != "local":
        return own
    proc = subprocess.run([str(ROOT / "hack" / "local-cluster.sh"), "up"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.fail(f"local test bed did not come up:\n{proc.stderr[-4000:]}")
    path = proc.stdout.strip().splitlines()[-1]
    os.environ["KUBECONFIG"] = path  # for subprocesses (kubectl, molecule, the operator)
    return path
