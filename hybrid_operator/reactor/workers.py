"""The workers: threads that take keys from the queue, reconcile them, and requeue what comes next.

Built by ``orchestration`` (as many workers as the global cap), started and stopped by the lifecycle with
what only the leader runs (a ``lifecycle.Runnable``); ``stop`` lets the runs in progress finish, until the
deadline. For each key: with ``--sharding``, ask the ring first (a key that is not ours is dropped, one a
peer has not drained yet is parked); reconcile through the ``Reconciler``; then requeue as the outcome says
(periodic, requeue_after, backoff after a failure) or act on ``failures.judge``'s verdict for an error.
``alive`` is the ``/healthz`` check: no worker died, none stuck past the run timeout. Idle workers also
tidy: the reconciler forgets what only a busy moment needed, and once no run has ended for ``trim_after``
seconds after some work, the C heaps give their freed pages back (``heap.trim``), so the memory of a burst
of runs does not stay resident at rest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from hybrid_operator import logs, metrics
from hybrid_operator.reactor import failures, heap
from hybrid_operator.reactor.failures import Retry
from hybrid_operator.reactor.kinds import Kind, Kinds
from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, PRIORITY_RESYNC, Key, WorkQueue
from hybrid_operator.reactor.reconciling import Reconciler
from hybrid_operator.reactor.sharding.ring import Ring
from hybrid_operator.reactor.sharding.rules import Verdict

log = logging.getLogger(__name__)


class Workers:
    """``count`` worker threads over ``queue``; ``ring`` is read at every key (set once sharding starts)."""

    def __init__(
        self,
        count: int,
        queue: WorkQueue,
        kinds: Kinds,
        reconciler: Reconciler,
        stop: threading.Event,
        ring: Callable[[], Ring | None],
        stuck_after: float,
    ) -> None:
        self.count, self.queue, self.kinds, self.reconciler = count, queue, kinds, reconciler
        self.stopping = stop
        self.ring = ring
        self.stuck_after = stuck_after  # seconds in one reconcile before /healthz calls a worker stuck
        self.threads: list[threading.Thread] = []
        self._busy_since: dict[str, float] = {}  # worker -> when its current reconcile started
        self.trim_after = 10.0  # seconds without a run ending, after some work, before the heap is trimmed
        self._last_run_ended = 0.0
        self._trimmed = True  # nothing ran since the last trim

    def start(self) -> None:
        for i in range(self.count):
            thread = threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop(self, deadline: float) -> bool:
        """Take no more keys; wait until ``deadline`` for the runs in progress. True if all ended."""
        self.stopping.set()
        self.queue.shutdown()
        finished = self.join(deadline)
        if not finished:
            log.warning("graceful shutdown timeout reached; abandoning running reconciles")
        return finished

    def ready(self) -> tuple[bool, str]:
        return self.alive()

    def join(self, deadline: float) -> bool:
        """Wait until ``deadline`` (monotonic) for the workers to end; True if all did."""
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self.threads)

    def _work(self) -> None:
        name = threading.current_thread().name
        while not self.stopping.is_set():
            key = self.queue.get(timeout=1.0)
            if key is None:
                self._tidy()
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
                self._last_run_ended, self._trimmed = time.monotonic(), False
                ring = self.ring()
                if ring is not None:
                    ring.end(key)
                self.queue.done(key)

    def _tidy(self) -> None:
        """An idle worker's chores: forget what only a busy moment needed; give a burst's memory back."""
        self.reconciler.tidy()
        idle = time.monotonic() - self._last_run_ended
        if not self._trimmed and not self._busy_since and idle >= self.trim_after:
            self._trimmed = True  # one trim per quiet spell, whichever idle worker gets here first
            heap.trim()

    def _may_run(self, key: Key) -> bool:
        """Without sharding, always; with it, only what the ring says RUN to (it then counts as in flight)."""
        ring = self.ring()
        if ring is None:
            return True
        kind = self.kinds.get(key.gvk)
        uid = kind.uid(key.namespace, key.name) if kind else None
        if uid is None:
            return False  # gone from the cache: nothing to run
        verdict = ring.begin(key, uid)
        if verdict is Verdict.DROP:
            self.queue.forget(key)
        return verdict is Verdict.RUN

    def _reconcile_one(self, key: Key) -> None:
        kind = self.kinds.by_gvk[key.gvk]
        started = time.monotonic()
        try:
            outcome = self.reconciler.reconcile(key, kind.ctx)
        except Exception as exc:
            metrics.RECONCILE_RESULTS.labels(key.gvk, "error").inc()
            if self.stopping.is_set():  # abandoned at the deadline: its executor closed under it, no bug
                log.info("reconcile of %s cut short by the stop: %s", key, exc)
                return
            self._after_error(key, kind, exc)
            return
        finally:
            metrics.RECONCILE_SECONDS.labels(key.gvk).observe(time.monotonic() - started)
        metrics.RECONCILE_RESULTS.labels(key.gvk, "succeeded" if outcome.succeeded else "failed").inc()
        if not outcome.succeeded:
            metrics.FAILURES.labels(key.gvk, outcome.reason or "Failed").inc()
        if outcome.retry:
            delay = self.queue.add_rate_limited(key)
            log.info("will retry %s in %.0fs", key, delay)
            return
        if outcome.succeeded:
            self.queue.forget(key)
        if outcome.requeue_after is not None:
            # 0 only comes from the reconciler itself (the object began deleting during its run: a change the
            # watch will report too); a role's requeue_after is at least reconciling.MIN_REQUEUE, a resync.
            priority = PRIORITY_CHANGE if outcome.requeue_after == 0 else PRIORITY_RESYNC
            self.queue.add(key, delay=outcome.requeue_after, priority=priority)

    def _after_error(self, key: Key, kind: Kind, exc: Exception) -> None:
        """Act on ``failures.judge``'s verdict for an error that ended a reconcile."""
        verdict = failures.judge(exc)
        reason = verdict.reason or ("Conflict" if verdict.retry is Retry.NOW else "Error")
        metrics.FAILURES.labels(key.gvk, reason).inc()
        if verdict.bug:
            log.exception("reconcile of %s crashed, retrying", key)
        if verdict.retry is Retry.NOW:
            log.info("reconcile of %s met a conflict; running again on fresh state: %s", key, exc)
            self.queue.add(key, priority=PRIORITY_RESYNC)  # a retry: never ahead of a change seen by a watch
        elif verdict.retry is Retry.BACKOFF:
            delay = self.queue.add_rate_limited(key, at_least=verdict.delay)
            if not verdict.bug:
                log.warning("reconcile of %s hit an error, retrying in %.0fs: %s", key, delay, exc)
        else:
            log.warning("reconcile of %s failed for good until it changes (%s): %s", key, verdict.reason, exc)
            self.reconciler.report(key, kind.ctx, verdict.reason, f"{exc}")

    def alive(self) -> tuple[bool, str]:
        dead = [t.name for t in self.threads if not t.is_alive()]
        if dead and not self.stopping.is_set():
            return False, "workers died: " + ", ".join(dead)
        now = time.monotonic()
        stuck = [name for name, since in list(self._busy_since.items()) if now - since > self.stuck_after]
        if stuck:
            return False, f"workers stuck for over {self.stuck_after:.0f}s: " + ", ".join(stuck)
        return True, f"{len(self.threads)} workers, {self.queue.processing()} busy, {self.queue.depth()} queued"
