"""Wiring: informers feed the queue, workers drain it through the reconciler; the lifecycle runs it all.

Called by ``cli.run`` with the lifecycle that already holds the probe and metrics servers. ``Operator``
builds the parts and hands them to the lifecycle in the order they start (``lifecycle.Group``): the runs'
proxy with the servers; the executor (``wiring``: executor, proxy, reconciler) and, with ``--sharding``,
the ring, which every replica keeps going; the leader elector with ``--leader-elect``; then what only the
leader runs: the workers (``workers``: reconcile and requeue), the watched kinds (``kinds``: discovery,
informers, events to keys) and the dependent watches. ``run_operator`` connects, builds, and runs the
lifecycle until SIGTERM, SIGINT or a lost Lease; the lifecycle stops it all in the reverse order.

With ``--sharding`` a ``sharding.ring.Ring`` stands between the queue and the workers: every replica
keeps the whole cache, but enqueues only the objects the ring gives it, asks the ring before each run,
and enqueues the objects it gains when the ring's members change (``sharding.callbacks``). A dependent's
event maps to its owner's key, so it follows the owner. There is no leader then: ``config`` refuses
``--leader-elect`` with ``--sharding``.
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from pathlib import Path

from hybrid_operator import metrics
from hybrid_operator.kube.client import Kube, KubeObject
from hybrid_operator.kube.leases import LeaderElector
from hybrid_operator.lifecycle import Group, Lifecycle, Loop
from hybrid_operator.proxy.cachereads import Caches
from hybrid_operator.reactor.dependents import DependentWatches
from hybrid_operator.reactor.kinds import Kinds
from hybrid_operator.reactor.queueing import Key, WorkQueue
from hybrid_operator.reactor.resuming import Resumer
from hybrid_operator.reactor.sharding.callbacks import RingCallbacks
from hybrid_operator.reactor.sharding.members import MemberLeases
from hybrid_operator.reactor.sharding.ring import Ring, abandon, member_id
from hybrid_operator.reactor.wiring import build_runtime
from hybrid_operator.reactor.workers import Workers
from hybrid_operator.serving.health import Probes
from hybrid_operator.settings.config import Config, Election
from hybrid_operator.settings.watches import Watch

log = logging.getLogger(__name__)
_SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class Operator:
    """The parts of a running operator, built together and handed to ``lifecycle`` in the order they start."""

    def __init__(self, config: Config, watches: list[Watch], kube: Kube, probes: Probes, lifecycle: Lifecycle) -> None:
        self.queue = WorkQueue(
            global_limit=config.reconciles.max_concurrent_total,
            per_kind_limits={str(w.gvk): config.reconciles.concurrency(w.gvk) for w in watches},
            spare_limit=config.reconciles.max_concurrent_total,  # for namespaces waiting behind stalled runs
        )
        self.caches = Caches()  # every informer's store, readable by the proxy with --proxy-cache-reads
        self.dependents = DependentWatches(
            kube,
            self.queue,
            watches,
            config.watching.namespaces,
            threading.Event(),
            self.caches,
            keep_bodies=config.proxy.cache_reads,
        )
        runtime = build_runtime(
            config,
            kube,
            on_child=self.dependents.on_child,
            caches=self.caches if config.proxy.cache_reads else None,
            watches=watches,
        )
        runtime.add_to(lifecycle)  # from here on the lifecycle closes the executor, whatever happens
        self.ring: Ring | None = None  # with --sharding: which objects are ours
        self.resumer = (
            Resumer(watches, config.runs.roles_paths, self.dependents, self.queue, self._lookup)
            if any(w.skip_converged_at_start for w in watches)
            else None
        )
        self.kinds = Kinds(config, watches, kube, self.queue, self.caches, threading.Event(), self._owns, self.resumer)
        self.workers = Workers(
            config.reconciles.max_concurrent_total * 2,  # the queue's regular and spare lanes
            self.queue,
            self.kinds,
            runtime.reconciler,
            threading.Event(),
            lambda: self.ring,
            stuck_after=config.runs.timeout + 120,
        )
        probes.live["workers"] = self.workers.alive
        if config.election.sharding:
            self.ring = _ring(config.election, kube, RingCallbacks(self.kinds, self.queue, lambda: self.ring))
            lifecycle.add(Group.OTHERS, "sharding ring", self.ring, check="ring")
        if config.election.leader_elect:
            metrics.IS_LEADER.set(0)
            lifecycle.add(Group.ELECTION, "leader election", _elector(config.election, kube, lifecycle), check="leader")
        else:
            metrics.IS_LEADER.set(1)
        lifecycle.add(Group.LEADING, "workers", self.workers)
        if self.resumer is not None:  # before the watches: it takes the converged objects they list
            lifecycle.add(Group.LEADING, "start-up checks", Loop("resume-check", self.resumer.run))
        lifecycle.add(Group.LEADING, "watches", self.kinds, check="watches")
        lifecycle.add(Group.LEADING, "dependent watches", self.dependents)

    def _owns(self, uid: str) -> bool:
        return self.ring is None or self.ring.owns(uid)

    def _lookup(self, key: Key) -> KubeObject | None:
        kind = self.kinds.get(key.gvk)
        return kind.ctx.lookup(key.namespace, key.name) if kind is not None else None


def run_operator(config: Config, watches: list[Watch], probes: Probes, lifecycle: Lifecycle) -> int:
    """The composition root: connect, build, run until a signal or a lost Lease, stop.

    Returns the exit code: 0 after a clean stop, 1 when the leader Lease was lost or start-up failed.
    """
    kube = Kube.connect(config.watching.kubeconfig)
    Operator(config, watches, kube, probes, lifecycle)
    return lifecycle.run()


def _ring(election: Election, kube: Kube, callbacks: RingCallbacks) -> Ring:
    """With --sharding: this replica's ring (it renews from its start until it stops, after the last run)."""
    duration = election.sharding_lease_duration
    leases = MemberLeases(kube, _lease_namespace(election), election.lease_name, member_id(), duration)
    return Ring(leases, duration, callbacks.on_view, abandon, callbacks.after_tick)


def _elector(election: Election, kube: Kube, lifecycle: Lifecycle) -> LeaderElector:
    """With --leader-elect: leading starts the LEADING group; a lost Lease stops everything, exit code 1."""

    def on_leading() -> None:
        metrics.IS_LEADER.set(1)
        lifecycle.lead()

    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    return LeaderElector(
        kube,
        _lease_namespace(election),
        election.lease_name,
        identity,
        on_leading=on_leading,
        on_lost=lambda: lifecycle.request_stop(1),
    )


def _lease_namespace(election: Election) -> str:
    if election.lease_namespace:
        return election.lease_namespace
    try:
        return Path(_SA_NAMESPACE).read_text().strip()
    except OSError:
        return "default"
