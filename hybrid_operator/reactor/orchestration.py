"""Wiring: informers feed the queue, workers drain it through the reconciler, SIGTERM drains it all.

Started by ``cli.run``. For every watches.yaml entry it resolves the kind through discovery (waiting,
with backoff, for a CRD that is not installed yet), starts one informer per watched namespace, and turns
watch events into queue keys: a new object, a new generation, a deletion mark, or (when asked) an
annotation change. Status-only updates, including our own, never wake an object. Workers (as many as
the global cap) take keys, reconcile, and requeue: periodic, requeue_after, or backoff after a failure.

With ``--sharding`` a ``sharding.Ring`` stands between the queue and the workers: every replica keeps
the whole cache, but enqueues only the objects the ring gives it, asks the ring before each run (a key
that is not ours is dropped, one a peer has not drained yet is parked), and enqueues the objects it
gains when the ring's members change. A dependent's event maps to its owner's key, so it follows the
owner. There is no leader then: ``config`` refuses ``--leader-elect`` with ``--sharding``.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hybrid_operator import eventlog, logs, metrics
from hybrid_operator.ansible.executors import Executor, build_executor
from hybrid_operator.errors import OperatorError
from hybrid_operator.kube.cachereads import Caches
from hybrid_operator.kube.client import ApiError, Kube, KubeObject, Resource
from hybrid_operator.kube.events import EventRecorder
from hybrid_operator.kube.leases import LeaderElector
from hybrid_operator.kube.proxy import ApiProxy
from hybrid_operator.kube.watching import Informer
from hybrid_operator.reactor import failures
from hybrid_operator.reactor.dependents import DependentWatches
from hybrid_operator.reactor.failures import Retry
from hybrid_operator.reactor.filtering import event_priority, wants_reconcile
from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, PRIORITY_RESYNC, Key, WorkQueue
from hybrid_operator.reactor.reconciling import KindContext, Reconciler
from hybrid_operator.reactor.sharding import rules as shards
from hybrid_operator.reactor.sharding.members import MemberLeases
from hybrid_operator.reactor.sharding.ring import Ring, abandon, member_id
from hybrid_operator.reactor.sharding.rules import Members, Verdict
from hybrid_operator.serving.health import Probes
from hybrid_operator.settings.config import Config
from hybrid_operator.settings.watches import Watch

log = logging.getLogger(__name__)
_SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


@dataclass
class Kind:
    ctx: KindContext
    informers: dict[str, Informer] = field(default_factory=dict)  # namespace ("" = all) -> informer

    def lookup(self, namespace: str, name: str) -> KubeObject | None:
        informer = self.informers.get(namespace) or self.informers.get("")
        return informer.get(namespace, name) if informer else None

    def uid(self, namespace: str, name: str) -> str | None:
        obj = self.lookup(namespace, name)
        uid = (obj or {}).get("metadata", {}).get("uid") if obj else None
        return uid if isinstance(uid, str) else None


class Operator:
    def __init__(
        self,
        config: Config,
        watches: list[Watch],
        kube: Kube,
        executor: Executor,
        probes: Probes,
        *,
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        self.config = config
        self.watches = watches
        self.kube = kube
        self.executor = executor
        self.probes = probes
        self.is_leader = is_leader
        self.stop = threading.Event()
        self.kinds: dict[str, Kind] = {}
        self.queue = WorkQueue(
            global_limit=config.max_concurrent_total,
            per_kind_limits={str(w.gvk): config.concurrency(w.gvk) for w in watches},
        )
        self.caches = Caches()  # every informer's store, readable by the proxy with --proxy-cache-reads
        self.dependents = DependentWatches(kube, self.queue, watches, config.namespaces, self.stop, self.caches)
        self.proxy = ApiProxy(
            kube,
            inject=config.inject_owner_ref,
            on_child=self.dependents.on_child,
            caches=self.caches if config.proxy_cache_reads else None,
        )
        self.reconciler = Reconciler(kube, executor, EventRecorder(kube), self.proxy)
        self._workers: list[threading.Thread] = []
        self._busy_since: dict[str, float] = {}  # worker -> when its current reconcile started
        self._started = False
        self.standby = False  # waiting for the leader Lease
        self.ring: Ring | None = None  # with --sharding: which objects are ours
        probes.ready["watches"] = self._watches_synced
        probes.ready["executor"] = executor.ready
        probes.live["workers"] = self._workers_alive

    # -- start / stop ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start workers, then each kind in its own thread: a kind whose CRD is missing waits alone."""
        self.proxy.start()
        for i in range(self.config.max_concurrent_total):
            thread = threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
            thread.start()
            self._workers.append(thread)
        for watch in self.watches:
            threading.Thread(
                target=self._start_kind_safely, args=(watch,), name=f"start-{watch.gvk.kind}", daemon=True
            ).start()
        self._started = True

    def _start_kind_safely(self, watch: Watch) -> None:
        try:
            self._start_kind(watch)
        except OperatorError as exc:
            log.info("not watching %s: %s", watch.gvk, exc)

    def _start_kind(self, watch: Watch) -> None:
        resource = self._discover(watch)
        gvk = str(watch.gvk)
        period = self.config.reconcile_period if watch.reconcile_period is None else watch.reconcile_period
        kind = Kind(
            ctx=KindContext(
                watch=watch,
                resource=resource,
                lookup=lambda ns, name: None,
                reconcile_period=period,
                verbosity=self.config.verbosity(watch.gvk),
                on_event=eventlog.event_logger(self.config.ansible_log_events),
                log_failed_output=eventlog.shows_failed_output(self.config.ansible_log_events),
            )
        )
        kind.ctx.lookup = kind.lookup
        namespaces = self.config.namespaces if resource.namespaced and self.config.namespaces else ("",)
        for namespace in namespaces:
            kind.informers[namespace] = Informer(
                self.kube,
                resource,
                self._handler(watch, gvk),
                namespace=namespace,
                label_selector=watch.selector,
            )
            self.caches.add(kind.informers[namespace])
        self.kinds[gvk] = kind  # before any event can reach a worker
        for namespace, informer in kind.informers.items():
            thread = threading.Thread(
                target=informer.run,
                args=(self.stop,),
                name=f"watch-{watch.gvk.kind}-{namespace or 'all'}",
                daemon=True,
            )
            thread.start()
        log.info(
            "watching %s (%s) in %s with %s, %d at once",
            gvk,
            resource.plural,
            ", ".join(namespaces) if namespaces != ("",) else "all namespaces",
            watch.target.describe(),
            self.config.concurrency(watch.gvk),
        )

    def _discover(self, watch: Watch) -> Resource:
        delay = 1.0
        while True:
            try:
                return self.kube.resource(watch.gvk)
            except ApiError as exc:
                if self.stop.is_set():
                    raise OperatorError("stopped while waiting for the API server") from exc
                log.warning("cannot resolve %s yet (%s); retrying in %.0fs", watch.gvk, exc, delay)
                self.stop.wait(delay)
                delay = min(30.0, delay * 2)

    def _handler(self, watch: Watch, gvk: str) -> Callable[[str, KubeObject | None, KubeObject], None]:
        def handle(event_type: str, old: KubeObject | None, new: KubeObject) -> None:
            meta = new.get("metadata") or {}
            key = Key(gvk, meta.get("namespace") or "", meta.get("name") or "")
            if event_type == "DELETED":
                self.queue.discard(key)
            elif self.ring is not None and not self.ring.owns(str(meta.get("uid") or "")):
                return  # another replica's object: it stays in our cache only
            elif wants_reconcile(watch, event_type, old, new):
                self.queue.add(key, priority=event_priority(event_type, new))

        return handle

    def shutdown(self, timeout: float) -> bool:
        """Stop taking work; wait up to ``timeout`` for running reconciles. True if all finished."""
        self.stop.set()
        self.queue.shutdown()
        deadline = time.monotonic() + timeout
        for thread in self._workers:
            thread.join(max(0.0, deadline - time.monotonic()))
        finished = not any(t.is_alive() for t in self._workers)
        self.executor.close()
        self.proxy.stop()
        self.reconciler.close()
        return finished

    # -- workers ---------------------------------------------------------------------------------------

    def _work(self) -> None:
        name = threading.current_thread().name
        while not self.stop.is_set():
            key = self.queue.get(timeout=1.0)
            if key is None:
                continue
            if not self._may_run(key):
                self.queue.done(key)
                continue
            self._busy_since[name] = time.monotonic()
            try:
                with logs.bind(kind=key.gvk, namespace=key.namespace, name=key.name):
                    self._reconcile_one(key)
            finally:
                self._busy_since.pop(name, None)
                if self.ring is not None:
                    self.ring.end(key)
                self.queue.done(key)

    def _may_run(self, key: Key) -> bool:
        """Without sharding, always; with it, only what the ring says RUN to (it then counts as in flight)."""
        if self.ring is None:
            return True
        kind = self.kinds.get(key.gvk)
        uid = kind.uid(key.namespace, key.name) if kind else None
        if uid is None:
            return False  # gone from the cache: nothing to run
        verdict = self.ring.begin(key, uid)
        if verdict is Verdict.DROP:
            self.queue.forget(key)
        return verdict is Verdict.RUN

    # -- the ring's callbacks (with --sharding) --------------------------------------------------------

    def owned_keys(self, view: Members, member: str) -> dict[Key, str]:
        """Every cached object ``member`` owns under ``view``: key -> uid."""
        owned = {}
        for gvk, kind in list(self.kinds.items()):
            for informer in list(kind.informers.values()):
                for obj in informer.objects():
                    meta = obj.get("metadata") or {}
                    uid = meta.get("uid")
                    if isinstance(uid, str) and shards.owner(uid, view) == member:
                        owned[Key(gvk, meta.get("namespace") or "", meta.get("name") or "")] = uid
        return owned

    def on_view(self, old: Members, new: Members) -> None:
        """Enqueue what the new view gives us that the old one did not."""
        if self.ring is None:
            return
        before = self.owned_keys(old, self.ring.me)
        gained = [key for key in self.owned_keys(new, self.ring.me) if key not in before]
        for key in gained:
            self.queue.add(key, priority=PRIORITY_RESYNC)
        log.info("ring gave this replica %d more objects", len(gained))

    def after_tick(self) -> None:
        """Hand parked keys back to the queue, and count what is ours."""
        if self.ring is None:
            return
        for key in self.ring.take_parked():
            self.queue.add(key, priority=PRIORITY_CHANGE)
        counts: dict[str, int] = dict.fromkeys(self.kinds, 0)
        for key in self.owned_keys(self.ring.view(), self.ring.me):
            counts[key.gvk] += 1
        for gvk, count in counts.items():
            metrics.SHARD_OBJECTS.labels(gvk).set(count)

    def _reconcile_one(self, key: Key) -> None:
        kind = self.kinds[key.gvk]
        started = time.monotonic()
        try:
            outcome = self.reconciler.reconcile(key, kind.ctx)
        except Exception as exc:
            metrics.RECONCILE_RESULTS.labels(key.gvk, "error").inc()
            self._after_error(key, kind, exc)
            return
        finally:
            metrics.RECONCILE_SECONDS.labels(key.gvk).observe(time.monotonic() - started)
        metrics.RECONCILE_RESULTS.labels(key.gvk, "succeeded" if outcome.succeeded else "failed").inc()
        if outcome.retry:
            delay = self.queue.add_rate_limited(key)
            log.info("will retry %s in %.0fs", key, delay)
            return
        if outcome.succeeded:
            self.queue.forget(key)
        if outcome.requeue_after is not None:
            priority = PRIORITY_CHANGE if outcome.requeue_after == 0 else PRIORITY_RESYNC
            self.queue.add(key, delay=outcome.requeue_after, priority=priority)

    def _after_error(self, key: Key, kind: Kind, exc: Exception) -> None:
        """Act on ``failures.judge``'s verdict for an error that ended a reconcile."""
        verdict = failures.judge(exc)
        if verdict.bug:
            log.exception("reconcile of %s crashed, retrying", key)
        if verdict.retry is Retry.NOW:
            log.info("reconcile of %s met a conflict; running again on fresh state: %s", key, exc)
            self.queue.add(key)
        elif verdict.retry is Retry.BACKOFF:
            delay = self.queue.add_rate_limited(key, at_least=verdict.delay)
            if not verdict.bug:
                log.warning("reconcile of %s hit an error, retrying in %.0fs: %s", key, delay, exc)
        else:
            log.warning("reconcile of %s failed for good until it changes (%s): %s", key, verdict.reason, exc)
            self.reconciler.report(key, kind.ctx, verdict.reason, f"{exc}")

    # -- probes ----------------------------------------------------------------------------------------

    def _watches_synced(self) -> tuple[bool, str]:
        if not self._started:
            return (True, "standing by: watches start when this replica leads") if self.standby else (False, "starting")
        unresolved = [str(w.gvk) for w in self.watches if str(w.gvk) not in self.kinds]
        if unresolved:
            return False, "kinds not served by the API server yet: " + ", ".join(unresolved)
        failing = [
            detail
            for kind in self.kinds.values()
            for inf in kind.informers.values()
            for ok, detail in [inf.health()]
            if not ok
        ]
        if failing:
            return False, "; ".join(failing)
        waiting = [
            f"{gvk}/{ns or '*'}"
            for gvk, kind in self.kinds.items()
            for ns, inf in kind.informers.items()
            if not inf.synced.is_set()
        ]
        if waiting:
            return False, "not synced yet: " + ", ".join(waiting)
        return True, f"{sum(len(k.informers) for k in self.kinds.values())} watches synced"

    def _workers_alive(self) -> tuple[bool, str]:
        dead = [t.name for t in self._workers if not t.is_alive()]
        if dead and not self.stop.is_set():
            return False, "workers died: " + ", ".join(dead)
        limit = self.config.run_timeout + 120
        now = time.monotonic()
        stuck = [name for name, since in list(self._busy_since.items()) if now - since > limit]
        if stuck:
            return False, f"workers stuck for over {limit:.0f}s: " + ", ".join(stuck)
        return (
            True,
            f"{len(self._workers)} workers, {self.queue.processing()} busy, {self.queue.depth()} queued",
        )


def run_operator(config: Config, watches: list[Watch], probes: Probes, stopping: threading.Event) -> int:
    """The composition root: connect, pick the executor, lead (if asked), run until ``stopping``, drain.

    Returns the exit code: 0 after a clean stop, 1 when the leader Lease was lost or start-up failed.
    """
    kube = Kube.connect(config.kubeconfig)
    executor = build_executor(config)
    try:
        operator = Operator(config, watches, kube, executor, probes)
    except BaseException:
        executor.close()  # its zygote and temporary dirs go with it
        raise
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
    ring = Ring(leases, config.sharding_lease_duration, operator.on_view, abandon, operator.after_tick)
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
