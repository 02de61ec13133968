"""Session fixtures shared by every integration test: a real Kubernetes API server.

``kubeconfig`` uses the cluster in ``KUBECONFIG`` when the user points at one of their own (kind, say),
unless ``HYBRID_OPERATOR_TESTBED=local`` forces the project's own test bed; otherwise it brings the local
test bed up with ``hack/local-cluster.sh up`` (built from source on first use, then cached).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

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


# pytest-xdist runs each group of tests on one worker, one test after the other: a test file is a group of
# its own, but for files that share something fixed on the cluster, which name one group here (a directory
# names every file below it). See tests/integration/conftest.py for when a test needs a group or `serial`.
GROUPS = {
    "tests/integration/test_rbac.py": "deploy",  # both apply deploy/'s RBAC (fixed namespaces and names)
    "tests/integration/test_metrics_auth.py": "deploy",  # and run operators on its tenant namespace
    # The cloud tests on one worker: the local cloud's services (one worker process each) are the bottleneck,
    # and side by side each test only took longer (the 20-server kill test 425 s alone, 500-640 s beside others).
    "tests/integration/openstack/": "cloud",
    # operator-sdk's memcached-molecule-operator: the same CRD, its role's once-a-machine metrics marker,
    # its Service in namespace default.
    "tests/integration/test_upstream_compat.py": "memcached",
    "tests/integration/test_docs_pages.py": "memcached",
    "tests/integration/test_lean_upstream.py": "memcached",
}


FIRST = ("cloud",)  # the longest group (about 14 minutes): handed out before all others


def group_of(nodeid: str) -> str:
    """The group of a test: the first of ``GROUPS`` whose key its node id starts with, else its file."""
    path = nodeid.split("::", 1)[0]
    return next((group for prefix, group in GROUPS.items() if nodeid.startswith(prefix)), path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` by ``group_of``. (xdist's own loadgroup reads ``xdist_group`` marks by renaming
    the items' nodeids, which pytest 9.2's nodeids no longer allow: every test would be a group of its own.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The groups are handed out to the workers in the order of the items, so the longest go first: the
    ``FIRST`` ones, the groups with the most integration tests (seconds to minutes each), then the rest
    (unit tests take milliseconds). hack/test.sh passes ``--no-loadscope-reorder``, which keeps that order."""
    weight: dict[str, int] = {}
    for item in items:
        group = group_of(item.nodeid)
        weight[group] = weight.get(group, 0) + (item.get_closest_marker("integration") is not None)
    order = {group: rank for rank, group in enumerate(sorted(weight, key=lambda g: (g not in FIRST, -weight[g])))}
    items.sort(key=lambda item: order[group_of(item.nodeid)])


@pytest.fixture(autouse=True)
def _root_logger_as_it_was() -> Any:
    """``logs.setup`` (a test running ``cli.main``, say) points the root logger at the stderr pytest gave
    that test, which pytest closes after it: every later log line of the process would then end in a
    "Logging error" traceback. Each test leaves the root logger's handlers and level as it found them."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
