"""Prometheus metrics: what an ops team graphs and alerts on.

Names follow operator-sdk's ``ansible_operator_*`` where upstream has one, so existing dashboards keep
working; the rest are ``hybrid_operator_*``. Incremented by the reactor (reconciles, queue), the watches
(restarts), leader election, the sharding ring, the executors (warm path on, artifact bytes) and the probes
(each readiness and liveness check as 0/1, so an alert can name the check); served by ``health`` on
``--metrics-bind-address``. Unlike upstream, the reconcile histogram measures the whole run, from dequeue to
status written. The alerts and the dashboard built on these names are in ``deploy/prometheus/`` and
``deploy/grafana/``: renaming a metric means changing them too (a unit test reads both).
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
FAILURES = Counter(
    "hybrid_operator_reconcile_failures",
    "Reconciles that did not succeed, by kind and reason: the role's Failure reason (Failed when it set none),"
    " RunTimedOut, a refusal's reason, or the API error's (Error for any other).",
    ["GVK", "reason"],
    registry=REGISTRY,
)
FAILING_OBJECTS = Gauge(
    "hybrid_operator_failing_objects",
    "Objects whose last reconcile failed and that are waiting to be retried with backoff.",
    ["GVK"],
    registry=REGISTRY,
)
FAILING_SINCE = Gauge(
    "hybrid_operator_oldest_failure_timestamp_seconds",
    "Unix time of the first failure of the object failing the longest without a success since (0: none failing).",
    ["GVK"],
    registry=REGISTRY,
)
QUEUE_WAIT = Histogram(
    "hybrid_operator_queue_wait_seconds",
    "Seconds an object waited, once due, before a worker took it.",
    ["GVK"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
WORKERS = Gauge(
    "hybrid_operator_max_concurrent_reconciles", "Reconciles allowed at once, by kind.", ["GVK"], registry=REGISTRY
)
RUN_PATHS = Counter(
    "hybrid_operator_run_paths",
    "Warm runs by the path their tasks took: lean (every task on the lean path), mixed, engine (Ansible's"
    " own steps throughout; the lean path off, or no task it could take).",
    ["path"],
    registry=REGISTRY,
)
PLAYBOOKS_LOADED_AHEAD = Counter(
    "hybrid_operator_playbooks_loaded_ahead",
    "Warm runs whose playbook (its plays, roles and tasks) the warm Ansible process had loaded ahead.",
    registry=REGISTRY,
)
WARM_EXECUTOR = Gauge(
    "hybrid_operator_warm_executor_enabled",
    "1 while runs fork from the warm Ansible process; 0 once it switched itself off (runs go through"
    " ansible-runner). Absent with --executor runner.",
    registry=REGISTRY,
)
ARTIFACT_BYTES = Gauge(
    "hybrid_operator_artifacts_bytes", "Bytes of finished runs' dirs kept on disk.", registry=REGISTRY
)
ARTIFACT_BUDGET = Gauge(
    "hybrid_operator_artifacts_budget_bytes",
    "The byte budget of kept runs' dirs (oldest deleted over it).",
    registry=REGISTRY,
)
READY = Gauge(
    "hybrid_operator_ready",
    "1 when this /readyz check passes, by check (watches, executor, leader, ring).",
    ["check"],
    registry=REGISTRY,
)
LIVE = Gauge(
    "hybrid_operator_live", "1 when this /healthz check passes, by check (workers).", ["check"], registry=REGISTRY
)
STARTUP_CHECKS = Counter(
    "hybrid_operator_startup_checks",
    "Objects a watch with skipConvergedAtStart found converged at start-up, by kind and outcome: skipped"
    " (its last run stands), drifted (a child changed meanwhile: run), unverified (its children could not be"
    " checked in time: run).",
    ["GVK", "result"],
    registry=REGISTRY,
)
IS_LEADER = Gauge("hybrid_operator_leader", "1 when this replica is the leader (or runs alone).", registry=REGISTRY)


def set_build_info(version: str, ansible_core: str) -> None:
    BUILD_INFO.info({"version": version, "ansible_core": ansible_core, "python": platform.python_version()})
