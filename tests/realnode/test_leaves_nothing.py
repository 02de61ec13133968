"""`hack/local-cluster.sh down` of a real-node bed leaves the host as `up --real-node` found it.

Run after `down`, against a footprint saved before `up` (footprint.py): no process, iptables rule or
chain (ours, kube-proxy's, the kubelet's), network link, network namespace, mount or kubelet cgroup is
left, the sysctls the kubelet and the CNI plugin change are back, and the host paths they make are gone.

Why a saved snapshot and a separate run instead of a test that calls `down` itself: bringing a real node
up and down inside a test costs the bed the other real-node tests run on (and another `up`, ~20 s, in
CI); comparing the whole host before and after the CI step's own `up`/`down` tests exactly the path a
developer takes, and on a CI machine nothing else changes the host between the two snapshots.
hack/test-realnode.sh saves the snapshot, runs the other tests, `down`, then this with
HYBRID_OPERATOR_REALNODE_BEFORE set.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.realnode import footprint

pytestmark = pytest.mark.realnode


def test_down_leaves_nothing_behind() -> None:
    saved = os.environ.get("HYBRID_OPERATOR_REALNODE_BEFORE")
    if not saved:
        pytest.skip(
            "needs a footprint saved before `up --real-node` and a `down` since: HYBRID_OPERATOR_REALNODE_BEFORE="
            "<python -m tests.realnode.footprint output> (hack/test-realnode.sh does it)"
        )
    if os.geteuid() != 0:
        pytest.skip("reading iptables and every process's executable needs root, as the real node does")
    before = json.loads(Path(saved).read_text())
    assert not Path("/run/lock/hybrid-operator-real-node").exists(), "a real node is still up (its lock is held)"
    assert footprint.differences(before, footprint.take()) == {}
