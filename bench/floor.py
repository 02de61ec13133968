"""The floor under P2: how long the test bed alone takes to make N Deployments available, with no operator.

    .venv/bin/python -m bench.floor --count 30 --rounds 3

P2 times an operator from N Foos created at once until every Foo reports ``availableReplicas ==
spec.replicas``; that includes the bed's own work after the operator made each Deployment (the controller
manager's ReplicaSets and Pods, the scheduler, the fake node marking Pods ready, the Deployment's status),
on the same 2 cores. Here the same N Deployments (P2's names, replicas 1-3 in turn, the Foo role's pod
template) are created at once from a thread pool, as P2 creates its Foos, and each is timed until its
status shows them all available: the time no operator can beat on this bed. Printed per round, with the
median; a ratio against the peer in P2 above ``peer / floor`` is out of reach on this machine. Needs
``$KUBECONFIG``; each round has a namespace of its own, removed after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import watch

if not __package__:  # run as ``python bench/floor.py``
    sys.path.append(str(Path(__file__).resolve().parent.parent))
from bench.cluster import Cluster

IMAGE = "nginx:latest"  # the Foo role's default image; the fake node never pulls it


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": "nginx", "controller": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "nginx", "image": IMAGE}]}},
        },
    }


def one_round(cluster: Cluster, count: int, timeout: float) -> float:
    """Seconds from the first create call until the last of ``count`` Deployments was available."""
    namespace = f"bench-floor-{uuid.uuid4().hex[:8]}"
    cluster.create_namespace(namespace, "floor")
    names = [f"foo-{i:05d}" for i in range(count)]
    want = {name: 1 + i % 3 for i, name in enumerate(names)}
    available: dict[str, float] = {}
    done = threading.Event()

    def follow() -> None:
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        for event in stream.stream(  # type: ignore[no-untyped-call]
            cluster.apps.list_namespaced_deployment, namespace, timeout_seconds=int(timeout)
        ):
            obj = event["object"]
            name = obj.metadata.name
            if name in want and name not in available and (obj.status.available_replicas or 0) >= want[name]:
                available[name] = time.monotonic()
                if len(available) == count:
                    stream.stop()  # type: ignore[no-untyped-call]
        done.set()

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    time.sleep(0.5)  # the watch is open before the first create
    start = time.monotonic()

    def create(name: str) -> None:
        cluster.apps.create_namespaced_deployment(namespace, deployment(name, want[name]))

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(create, names))
        if not done.wait(timeout) or len(available) < count:
            raise TimeoutError(f"{len(available)}/{count} Deployments available after {timeout:.0f} s")
        return max(available.values()) - start
    finally:
        cluster.delete_namespaces([namespace], 120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=30, help="Deployments at once (default 30, P2's)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        print("bench.floor: set KUBECONFIG to the test bed's (hack/local-cluster.sh up prints it)", file=sys.stderr)
        return 2
    cluster = Cluster(kubeconfig)
    print(f"on {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    seconds = []
    for index in range(args.rounds):
        seconds.append(one_round(cluster, args.count, args.timeout))
        print(f"round {index + 1}: {args.count} Deployments available {seconds[-1]:.2f} s after the first create")
    print(f"median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
