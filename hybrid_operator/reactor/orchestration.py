"""Wiring: informers feed the queue, workers drain it through the reconciler, SIGTERM drains it all.

Started by ``cli.run``. ``Operator`` puts the parts together: the queue, the informers' caches, the
dependent watches, the runtime (``wiring``: executor, runs' proxy, reconciler), the watched kinds
(``kinds``: discovery, informers, events to keys) and the workers (``workers``: reconcile and requeue).
``run_operator`` is the composition root: it connects, leads when asked (``--leader-elect``) or joins
the ring (``--sharding``), runs until SIGTERM and drains.

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
import time
import uuid
from pathlib import Path

from hybrid_operator import metrics
from hybrid_operator.errors import OperatorError
from hybrid_operator.kube.client import Kube, KubeObject
from hybrid_operator.kube.leases import LeaderElector
from hybrid_operator.proxy.cachereads import Caches
from hybrid_operator.reactor.dependents import DependentWatches
from hybrid_operator.reactor.kinds import Kinds
from hybrid_operator.reactor.queueing import Key, WorkQueue
from hybrid_operator.reactor.resuming import Resumer
from hybrid_operator.reactor.sharding.callbacks import RingCallbacks
from hybrid_operator.reactor.sharding.members import MemberLeases
from hybrid_operator.reactor.sharding.ring import Ring, abandon, member_id
from hybrid_operator.reactor.wiring import Runtime, build_runtime
from hybrid_operator.reactor.workers import Workers
from hybrid_operator.serving.health import Probes
from hybrid_operator.settings.config import Config
from hybrid_operator.settings.watches import Watch

log = logging.getLogger(__name__)
_SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class Operator:
    """The parts of a running operator, started together and drained together."""

    def __init__(self, config: Config, watches: list[Watch], kube: Kube, probes: Probes) -> None:
        self.config = config
        self.watches = watches
        self.kube = kube
        self.stop = threading.Event()
        self.queue = WorkQueue(
            global_limit=config.max_concurrent_total,
            per_kind_limits={str(w.gvk): config.concurrency(w.gvk) for w in watches},
            spare_limit=config.max_concurrent_total,  # for namespaces waiting behind stalled runs
        )
        self.caches = Caches()  # every informer's store, readable by the proxy with --proxy-cache-reads
        self.dependents = DependentWatches(
            kube, self.queue, watches, config.namespaces, self.stop, self.caches, keep_bodies=config.proxy_cache_reads
        )
        self.runtime: Runtime = build_runtime(
            config,
            kube,
            on_child=self.dependents.on_child,
            caches=self.caches if config.proxy_cache_reads else None,
        )
        runtime = self.runtime
        self.ring: Ring | None = None  # with --sharding: which objects are ours
        self.resumer = (
            Resumer(watches, config.roles_paths, self.dependents, self.queue, self._lookup)
            if any(w.skip_converged_at_start for w in watches)
            else None
        )
        self.kinds = Kinds(config, watches, kube, self.queue, self.caches, self.stop, self._owns, self.resumer)
        self.workers = Workers(
            config.max_concurrent_total * 2,  # the queue's regular and spare lanes
            self.queue,
            self.kinds,
            runtime.reconciler,
            self.stop,
            lambda: self.ring,
            stuck_after=config.run_timeout + 120,
        )
        self.callbacks = RingCallbacks(self.kinds, self.queue, lambda: self.ring)
        self._started = False
        self.standby = False  # waiting for the leader Lease
        probes.ready["watches"] = self._watches_synced
        probes.ready["executor"] = runtime.executor.ready
        probes.live["workers"] = self.workers.alive

    def _owns(self, uid: str) -> bool:
        return self.ring is None or self.ring.owns(uid)

    def _lookup(self, key: Key) -> KubeObject | None:
        kind = self.kinds.get(key.gvk)
        return kind.lookup(key.namespace, key.name) if kind is not None else None

    def start(self) -> None:
        """Start the proxy and the workers, then each kind in its own thread."""
        self.runtime.start()
        self.workers.start()
        if self.resumer is not None:
            threading.Thread(target=self.resumer.run, args=(self.stop,), name="resume-check", daemon=True).start()
        self.kinds.start()
        self._started = True

    def shutdown(self, timeout: float) -> bool:
        """Stop taking work; wait up to ``timeout`` for running reconciles. True if all finished."""
        self.stop.set()
        self.queue.shutdown()
        finished = self.workers.join(time.monotonic() + timeout)
        self.runtime.close()
        return finished

    def _watches_synced(self) -> tuple[bool, str]:
        if not self._started:
            return (True, "standing by: watches start when this replica leads") if self.standby else (False, "starting")
        return self.kinds.watches_synced()


def run_operator(config: Config, watches: list[Watch], probes: Probes, stopping: threading.Event) -> int:
    """The composition root: connect, pick the executor, lead (if asked), run until ``stopping``, drain.

    Returns the exit code: 0 after a clean stop, 1 when the leader Lease was lost or start-up failed.
    """
    kube = Kube.connect(config.kubeconfig)
    operator = Operator(config, watches, kube, probes)  # a failure here leaves no executor running
    threading.Thread(target=_forward_stop, args=(stopping, operator.stop), daemon=True).start()
    elector = _elector(config, kube) if config.leader_elect else None
    ring_stop = threading.Event()
    ring = _join_ring(config, kube, operator, probes, ring_stop) if config.sharding else None
    lost = threading.Event()
    try:  # however this ends, shutdown() stops the executor and removes the temporary dirs
        if elector is not None:
            metrics.IS_LEADER.set(0)
            probes.ready["leader"] = elector.can_lead
            operator.standby = True
            if not elector.acquire(stopping):
                return 0
            operator.standby = False

            def on_lost() -> None:
                lost.set()
                stopping.set()

            threading.Thread(target=elector.keep, args=(stopping, on_lost), name="lease", daemon=True).start()
        metrics.IS_LEADER.set(1)
        try:
            operator.start()
        except OperatorError as exc:
            log.error("could not start: %s", exc)
            return 1
        log.info("started: %d kinds, up to %d reconciles at once", len(watches), config.max_concurrent_total)
        stopping.wait()
    finally:
        finished = operator.shutdown(config.graceful_shutdown_timeout)  # the ring renews meanwhile
        if not finished:
            log.warning("graceful shutdown timeout reached; abandoning running reconciles")
        ring_stop.set()
        if ring is not None and finished:
            ring.leave()  # no run of ours is left: the others may take our objects now
    if elector is not None and not lost.is_set():
        elector.release()
    log.info("stopped")
    return 1 if lost.is_set() else 0


def _join_ring(config: Config, kube: Kube, operator: Operator, probes: Probes, stop: threading.Event) -> Ring:
    """With --sharding: this replica's ring, renewing from now until ``stop`` (after the last run ended)."""
    leases = MemberLeases(
        kube, _lease_namespace(config), config.leader_election_id, member_id(), config.sharding_lease_duration
    )
    callbacks = operator.callbacks
    ring = Ring(leases, config.sharding_lease_duration, callbacks.on_view, abandon, callbacks.after_tick)
    operator.ring = ring
    probes.ready["ring"] = ring.status
    threading.Thread(target=ring.run, args=(stop,), name="ring", daemon=True).start()
    return ring


def _forward_stop(source: threading.Event, target: threading.Event) -> None:
    source.wait()
    target.set()


def _lease_namespace(config: Config) -> str:
    if config.leader_election_namespace:
        return config.leader_election_namespace
    try:
        return Path(_SA_NAMESPACE).read_text().strip()
    except OSError:
        return "default"


def _elector(config: Config, kube: Kube) -> LeaderElector:
    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    return LeaderElector(kube, _lease_namespace(config), config.leader_election_id, identity)
