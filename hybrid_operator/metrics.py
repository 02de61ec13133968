"""Prometheus metrics: what an ops team graphs and alerts on.

Names follow operator-sdk's ``ansible_operator_*`` where upstream has one, so existing dashboards keep
working; the rest are ``hybrid_operator_*``. Incremented by the reactor (reconciles, queue), the watches
(restarts), leader election and the sharding ring; served by ``health`` on ``--metrics-bind-address``.
Unlike upstream, the reconcile histogram measures the whole run, from dequeue to status written.
"""

from __future__ import annotations

import platform

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

REGISTRY = CollectorRegistry(auto_describe=True)

BUILD_INFO = Info("ansible_operator_build", "Build information of the running operator.", registry=REGISTRY)
RECONCILE_RESULTS = Counter(
    "ansible_operator_reconcile_result",
    "Reconciles finished, by kind and result (succeeded, failed, error).",
    ["GVK", "result"],
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "ansible_operator_reconciles",
    "Seconds one reconcile took, from dequeue to status written.",
    ["GVK"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "hybrid_operator_queue_depth", "Objects waiting for a worker (ready now).", ["GVK"], registry=REGISTRY
)
QUEUE_DELAYED = Gauge(
    "hybrid_operator_queue_delayed", "Objects scheduled for a later reconcile.", ["GVK"], registry=REGISTRY
)
IN_FLIGHT = Gauge("hybrid_operator_runs_in_flight", "Reconciles running now.", ["GVK"], registry=REGISTRY)
RETRIES = Counter(
    "hybrid_operator_reconcile_retries",
    "Reconciles requeued with backoff after a failure.",
    ["GVK"],
    registry=REGISTRY,
)
WATCH_RESTARTS = Counter(
    "hybrid_operator_watch_restarts",
    "Watches restarted, by kind and reason (expired, relist, error).",
    ["GVK", "reason"],
    registry=REGISTRY,
)
SHARD_OBJECTS = Gauge(
    "hybrid_operator_shard_objects",
    "Watched objects this replica owns in its sharding ring (all of them without --sharding).",
    ["GVK"],
    registry=REGISTRY,
)
RING_MEMBERS = Gauge("hybrid_operator_ring_members", "Live members of the sharding ring.", registry=REGISTRY)
RING_CHANGES = Counter(
    "hybrid_operator_ring_membership_changes",
    "Times this replica saw the sharding ring's live members change.",
    registry=REGISTRY,
)
PROXY_READS = Counter(
    "hybrid_operator_proxy_reads",
    "GETs of runs through the proxy (watches excluded), by where the answer came from (cache, api).",
    ["source"],
    registry=REGISTRY,
)
IS_LEADER = Gauge("hybrid_operator_leader", "1 when this replica is the leader (or runs alone).", registry=REGISTRY)


def set_build_info(version: str, ansible_core: str) -> None:
    BUILD_INFO.info({"version": version, "ansible_core": ansible_core, "python": platform.python_version()})
