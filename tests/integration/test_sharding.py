"""Sharding on the real test bed: replicas share the objects, never run one object at once, survive a death.

Each replica is a real operator process with ``--sharding`` and short leases (3 s), in the test's
namespace (its ring's Leases too). The role (``fixtures/projects/sharded``) holds every run for a second
and records it as a file of its own: object, start, end, replica, and the spec's ``wave``. The tests read
those files back: every object reconciled, no two runs of one object overlapping in time (whatever the
replicas), every replica at work; after ``kill -9`` of one replica, its objects, touched again, are run by
the survivors within the lease duration plus 15 s; a rolling restart (replicas joining, others stopping
cleanly) with every object changed at each step skips none and never runs one twice at once.
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


def test_a_rolling_restart_moves_every_object_without_skipping_one_or_running_one_twice_at_once(
    replica: Callable[..., OperatorProcess], objects: Objects, api: client.ApiClient, runs_dir: Path
) -> None:
    """As a Deployment rolls 2 replicas: a new one joins, then an old one stops cleanly (deleting its
    Lease), twice, with every object changed at each step while the ring changes hands."""
    olds = {name: replica(name, wait_ready=False) for name in ("replica-a", "replica-b")}
    wait_until(lambda: all(op.ready() for op in olds.values()), 90, "two replicas ready (joined the ring)")
    names = create_objects(objects, 20)
    wait_until(lambda: len(ran_in_wave(runs_dir, 1)) == len(names), 120, "every object run", interval=0.5)
    wave = 1
    for old, new in (("replica-a", "replica-c"), ("replica-b", "replica-d")):
        replica(new)  # ready: it has joined the ring
        wave += 1
        touch_all(objects, names, wave)  # while the objects move to the newcomer
        assert olds[old].terminate(60) == 0  # drains, then deletes its Lease
        wait_until(lambda w=wave: len(ran_in_wave(runs_dir, w)) == len(names), 90, f"wave {wave} run", interval=0.5)
        assert new in ran_in_wave(runs_dir, wave).values()
    holders = sorted(lease.spec.holder_identity for lease in leases(api, objects.namespace))
    assert holders == ["replica-c", "replica-d"], "stopped replicas deleted their Leases"
    wave += 1
    touch_all(objects, names, wave)
    wait_until(lambda: len(ran_in_wave(runs_dir, wave)) == len(names), 90, "the last wave run", interval=0.5)
    by = Counter(ran_in_wave(runs_dir, wave).values())
    assert set(by) == {"replica-c", "replica-d"}, by
    assert not overlaps(runs(runs_dir)), overlaps(runs(runs_dir))
    print(f"\nrolled 2 replicas; {len(runs(runs_dir))} runs, none overlapping; last wave by {dict(by)}")
