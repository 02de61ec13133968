"""Sharding on the real test bed: replicas share the objects, never run one object at once, survive a death.

Each replica is a real operator process with ``--sharding`` and short leases (3 s), in the test's
namespace (its ring's Leases too). The role (``fixtures/projects/sharded``) holds every run for a second
and records it as a file of its own: object, start, end, replica, and the spec's ``wave``. The tests read
those files back: every object reconciled, no two runs of one object overlapping in time (whatever the
replicas), every replica at work; after ``kill -9`` of one replica, every object, touched again, is run by
the survivors within the lease duration plus 15 s; a replica that joins takes objects over, again without
overlap.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.integration.conftest import FIXTURES, Objects, OperatorProcess, wait_until

GROUP, VERSION, PLURAL = "test.hybrid-operator.dev", "v1", "opens"
WATCHES = FIXTURES / "projects" / "sharded" / "watches.yaml"
LEASE = 3.0  # --sharding-lease-duration, seconds
OBJECTS = 60


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    path = tmp_path / "runs"
    path.mkdir()
    return path


def runs(runs_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in runs_dir.glob("*.run"):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # being written
    return out


def overlaps(records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs of runs of one object whose [start, end] intervals intersect."""
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_name[record["name"]].append(record)
    found = []
    for items in by_name.values():
        items.sort(key=lambda r: r["start"])
        found += [(a, b) for a, b in itertools.pairwise(items) if b["start"] < a["end"]]
    return found


def ran_in_wave(runs_dir: Path, wave: int) -> dict[str, str]:
    """Object -> replica, for each object with a run that saw spec.wave == ``wave``."""
    return {r["name"]: r["replica"] for r in runs(runs_dir) if int(r["wave"]) == wave}


def touch_all(objects: Objects, names: list[str], wave: int) -> None:
    for name in names:
        objects.patch(GROUP, VERSION, PLURAL, name, {"spec": {"wave": wave}})


def leases(api: client.ApiClient, namespace: str) -> list[Any]:
    return list(
        client.CoordinationV1Api(api)
        .list_namespaced_lease(namespace, label_selector="hybrid-operator.dev/ring=hybrid-operator")
        .items
    )


@pytest.fixture
def replica(operator: Callable[..., OperatorProcess], namespace: str, runs_dir: Path) -> Callable[..., OperatorProcess]:
    def start(name: str, wait_ready: bool = True) -> OperatorProcess:
        return operator(
            WATCHES,
            "--sharding",
            f"--sharding-lease-duration={LEASE:.0f}s",
            "--leader-election-namespace",
            namespace,
            "--reconcile-period=0",
            "--max-concurrent-reconciles=4",  # the role mostly waits: let each replica hold 4 at once
            env={"POD_NAME": name, "SHARD_RUN_LOG": str(runs_dir)},
            wait_ready=wait_ready,
        )

    return start


def create_objects(objects: Objects, count: int) -> list[str]:
    names = [f"obj-{i:02d}" for i in range(count)]
    for name in names:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Open", "metadata": {"name": name}, "spec": {"wave": 1}}
        objects.create(GROUP, VERSION, PLURAL, body)
    return names


def test_three_replicas_share_60_objects_without_overlap_and_survive_a_kill_9(
    replica: Callable[..., OperatorProcess], objects: Objects, api: client.ApiClient, runs_dir: Path
) -> None:
    ops = {name: replica(name, wait_ready=False) for name in ("replica-a", "replica-b", "replica-c")}
    wait_until(lambda: all(op.ready() for op in ops.values()), 90, "three replicas ready (joined the ring)")
    assert len(leases(api, objects.namespace)) == 3
    create_objects(objects, OBJECTS)
    started = time.monotonic()
    wait_until(lambda: len(ran_in_wave(runs_dir, 1)) == OBJECTS, 120, "every object run once", interval=0.5)
    took = time.monotonic() - started
    first = runs(runs_dir)
    per_replica = Counter(r["replica"] for r in first)
    assert set(per_replica) == set(ops), f"runs per replica: {per_replica}"
    assert not overlaps(first), overlaps(first)
    print(f"\n{OBJECTS} objects over 3 replicas in {took:.1f}s; runs per replica: {dict(per_replica)}")
    for op in ops.values():
        assert "hybrid_operator_shard_objects" in op.metrics()

    # kill -9 one replica, then change each of its objects: the survivors run them within the lease + 15 s.
    victim = "replica-b"
    orphans = sorted(name for name, by in ran_in_wave(runs_dir, 1).items() if by == victim)
    os.kill(ops[victim].proc.pid, signal.SIGKILL)
    ops[victim].proc.wait(10)
    killed = time.monotonic()
    touch_all(objects, orphans, 2)
    wait_until(lambda: len(ran_in_wave(runs_dir, 2)) == len(orphans), LEASE + 15, "the victim's objects run again")
    took = time.monotonic() - killed
    second = ran_in_wave(runs_dir, 2)
    assert set(second.values()) <= {"replica-a", "replica-c"}, second
    everything = runs(runs_dir)
    assert not overlaps(everything), overlaps(everything)
    by = dict(Counter(second.values()))
    print(f"after kill -9 of {victim}: its {len(orphans)} objects run by {by} in {took:.1f}s")


def test_a_replica_that_joins_takes_objects_over_without_overlap_and_one_that_leaves_hands_them_back(
    replica: Callable[..., OperatorProcess], objects: Objects, api: client.ApiClient, runs_dir: Path
) -> None:
    first = replica("replica-a")
    names = create_objects(objects, 20)
    wait_until(lambda: len(ran_in_wave(runs_dir, 1)) == len(names), 120, "every object run by the first", interval=0.5)
    assert set(ran_in_wave(runs_dir, 1).values()) == {"replica-a"}
    second = replica("replica-b")
    assert len(leases(api, objects.namespace)) == 2  # ready means joined
    # Touch everything while the ring changes hands: no object may be run by both at once.
    touch_all(objects, names, 2)
    wait_until(lambda: len(ran_in_wave(runs_dir, 2)) == len(names), 90, "every object run again", interval=0.5)
    by = Counter(ran_in_wave(runs_dir, 2).values())
    assert by["replica-b"] > 0, by
    assert not overlaps(runs(runs_dir)), overlaps(runs(runs_dir))
    # A clean stop deletes the member Lease: the other takes over without waiting for it to expire.
    assert first.terminate(60) == 0
    assert [lease.spec.holder_identity for lease in leases(api, objects.namespace)] == ["replica-b"]
    stopped = time.monotonic()
    touch_all(objects, names, 3)
    wait_until(lambda: len(ran_in_wave(runs_dir, 3)) == len(names), 90, "every object run by the one left")
    assert set(ran_in_wave(runs_dir, 3).values()) == {"replica-b"}
    assert not overlaps(runs(runs_dir)), overlaps(runs(runs_dir))
    print(f"\njoin: {dict(by)}; after a clean stop, all run by the other in {time.monotonic() - stopped:.1f}s")
    assert second.proc.poll() is None
