"""The work queue between the watches and the workers.

Semantics (client-go's workqueue, plus what operator-sdk lacks):

- an object is identified by its ``Key``; adding a key that is already waiting collapses into one entry
  (the run will read the object's latest state), and its due time moves earlier, never later;
- a key being processed is never handed to a second worker: if it is added meanwhile it is marked dirty
  and comes back once the first run is done;
- failures are requeued with per-key exponential backoff, capped; success forgets the count;
- a concurrency cap per kind **and** a global cap across kinds (operator-sdk#3585);
- changes seen by a watch go before periodic resyncs and retries, so thousands of idle objects coming
  due never starve a new one (operator-sdk#1978, #5246);
- namespaces share the workers in turn: within a priority, each namespace has its own FIFO and a free
  worker takes the first key it may run from the namespace whose last turn is the oldest (one that never
  had a turn goes first), and that namespace goes to the back. One tenant's flood of objects therefore
  delays another tenant's new object by at most the runs already in progress, about one per worker, and
  the flooding namespace is never starved either: among namespaces with work it waits at most one turn
  of each of the others. Cluster-scoped objects share the namespace "".
- no namespace holds every worker while another waits: runs that hang (a role waiting on something that
  never comes, until ``--ansible-run-timeout``) would otherwise hold all the workers and stall every
  tenant. When at least ``global_limit`` runs have each been running for ``STALLED_AFTER`` seconds, a key
  of a namespace with no run in progress may start on a spare lane anyway, past the kind's and the global
  cap, up to ``spare_limit`` more runs at once (the orchestration gives as many spare lanes as workers).
  Runs that end in seconds never open one; a namespace already running never gets one.

Periodic resyncs are spread over their period (``resync_delay``): each key comes due at a phase of its own
in the period, so objects created (or restarted) together never come due together, and stay spread.

Its gauges (depth, delayed, in flight, the caps, the objects failing and since when) are refreshed on
every change; the time a key waited once due goes into ``hybrid_operator_queue_wait_seconds``.

Called by the watch handlers (``add``) and the workers (``get`` / ``done``) of ``orchestration``.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import itertools
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hybrid_operator import metrics
from hybrid_operator.kube.objects import GVK, key_of

PRIORITY_CHANGE = 0  # a watch saw the object change
PRIORITY_RESYNC = 1  # periodic reconcile, requeue_after, retry
STALLED_AFTER = 10.0  # seconds every regular lane's run has been going before a spare lane may open
# Namespaces whose last turn is remembered besides those with work waiting; one forgotten counts as never
# served, which only matters if it had no turn in the last this-many turns of others.
TURNS_REMEMBERED = 4096


@dataclass(frozen=True, order=True)
class Key:
    gvk: str  # str(GVK)
    namespace: str
    name: str

    @classmethod
    def of(cls, gvk: GVK | str, obj: Mapping[str, Any]) -> Key:
        """The key of ``obj``, an object of kind ``gvk``: its namespace and name as ``key_of`` reads them."""
        return cls(str(gvk), *key_of(obj))

    def __str__(self) -> str:
        return f"{self.gvk} {self.namespace}/{self.name}" if self.namespace else f"{self.gvk} {self.name}"


def resync_delay(key: Key, period: float, now: float) -> float:
    """Seconds from ``now`` (wall-clock) until ``key``'s next periodic resync: more than 0, at most ``period``.

    A key's resyncs fall at its own phase of the period, a stable hash of the key (the same in every replica
    and after a restart), so N objects with period P come due about N/P per second whenever they were
    created or last ran, instead of all at once every period (what a fixed delay after each run does to
    objects created together). Between resyncs the interval is exactly ``period``; after a run for another
    reason (a change, the start-up) the next resync may come sooner than ``period``, never later.
    """
    if period <= 0:
        return period
    digest = hashlib.blake2b(str(key).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    phase = int.from_bytes(digest, "big") / 2**64 * period
    delay = (phase - now) % period
    return delay if delay > period * 1e-6 else period  # at the phase now (or a rounding away): a period on


class WorkQueue:
    def __init__(
        self,
        *,
        global_limit: int,
        per_kind_limits: Mapping[str, int],
        backoff_base: float = 1.0,
        backoff_cap: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        spare_limit: int = 0,
    ) -> None:
        self.global_limit = global_limit
        self.spare_limit = spare_limit  # runs past the caps for namespaces with none running (see above)
        self.per_kind_limits = dict(per_kind_limits)
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._clock = clock
        self._wall_clock = wall_clock
        self._cond = threading.Condition()
        self._delayed: dict[Key, float] = {}  # key -> due time (the truth; the heap may be stale)
        self._heap: list[tuple[float, int, Key]] = []
        self._seq = itertools.count()
        # Due keys by priority, each lane a FIFO per namespace; a key is in at most one lane and never
        # also delayed. Namespaces take turns in the order of their last turn, ``_turns``.
        self._turns: OrderedDict[str, int] = OrderedDict()  # namespace -> its last turn, oldest first
        self._turn = itertools.count()
        self._ready = [_Lane(self._last_turn), _Lane(self._last_turn)]
        self._processing: dict[Key, float] = {}  # key -> clock time its run started
        self._dirty: dict[Key, int] = {}  # added while processing -> priority
        self._running: Counter[str] = Counter()  # runs in progress per kind
        self._in_namespace: Counter[str] = Counter()  # runs in progress per namespace
        self._failures: Counter[Key] = Counter()
        self._failing_since: dict[Key, float] = {}  # wall-clock time of the first failure in a row
        self._due_since: dict[Key, float] = {}  # clock time a key in a lane became due
        self._shutdown = False
        for gvk, limit in self.per_kind_limits.items():
            metrics.WORKERS.labels(gvk).set(limit)

    # -- producers -------------------------------------------------------------------------------------

    def add(self, key: Key, *, delay: float = 0.0, priority: int = PRIORITY_CHANGE) -> None:
        with self._cond:
            if self._shutdown:
                return
            if key in self._processing and delay <= 0:
                self._dirty[key] = min(priority, self._dirty.get(key, priority))
                return
            queued = self._ready_priority(key)
            if queued is not None:  # already due: at most raise its priority
                if priority < queued:
                    self._ready[queued].remove(key)
                    self._make_ready(priority, key)
                return
            if delay <= 0:
                self._delayed.pop(key, None)
                self._make_ready(priority, key)
            else:
                due = self._clock() + delay
                if self._delayed.get(key, float("inf")) <= due:
                    return
                self._delayed[key] = due
                heapq.heappush(self._heap, (due, next(self._seq), key))
            self._cond.notify_all()

    def add_rate_limited(self, key: Key, at_least: float = 0.0) -> float:
        """Requeue after a failure, no sooner than ``at_least`` (a server's Retry-After); returns the delay."""
        with self._cond:
            self._failures[key] += 1
            self._failing_since.setdefault(key, self._wall_clock())
            # The exponent stops growing long before 2**n overflows a float (1,024 failures of one key).
            delay = min(self.backoff_cap, self.backoff_base * 2.0 ** min(self._failures[key] - 1, 64))
            delay = max(delay, min(at_least, self.backoff_cap))
        metrics.RETRIES.labels(key.gvk).inc()
        self.add(key, delay=delay, priority=PRIORITY_RESYNC)
        return delay

    def forget(self, key: Key) -> None:
        with self._cond:
            self._failures.pop(key, None)
            if self._failing_since.pop(key, None) is not None:
                self._refresh_gauges()

    def failures(self, key: Key) -> int:
        with self._cond:
            return self._failures[key]

    def discard(self, key: Key) -> None:
        """Drop a waiting key (its object is gone)."""
        with self._cond:
            self._delayed.pop(key, None)
            for ready in self._ready:
                ready.remove(key)
            self._failures.pop(key, None)
            self._failing_since.pop(key, None)
            self._due_since.pop(key, None)
            self._dirty.pop(key, None)
            self._refresh_gauges()

    # -- consumers -------------------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> Key | None:
        """Block until a key is due and its kind (and the whole operator) is under its cap."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while not self._shutdown:
                wait = self._promote_due()
                key = self._pick()
                if key is not None:
                    waited = self._clock() - self._due_since.pop(key, self._clock())
                    metrics.QUEUE_WAIT.labels(key.gvk).observe(max(0.0, waited))
                    self._processing[key] = self._clock()
                    self._running[key.gvk] += 1
                    self._in_namespace[key.namespace] += 1
                    self._refresh_gauges()
                    return key
                stalls = self._stalls_in()
                if stalls:  # spare lanes open then: look again (0.0: open now, and nothing may take one)
                    wait = stalls if wait is None else min(wait, stalls)
                if deadline is not None:
                    remaining = deadline - self._clock()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._cond.wait(wait)
            return None

    def done(self, key: Key) -> None:
        with self._cond:
            if self._processing.pop(key, None) is not None:
                self._in_namespace[key.namespace] -= 1
                if self._in_namespace[key.namespace] <= 0:
                    del self._in_namespace[key.namespace]
            self._running[key.gvk] -= 1
            priority = self._dirty.pop(key, None)
            if priority is not None:
                queued = self._ready_priority(key)
                if queued is None or priority < queued:
                    if queued is not None:
                        self._ready[queued].remove(key)
                    self._delayed.pop(key, None)
                    self._make_ready(priority, key)
            self._refresh_gauges()
            self._cond.notify_all()

    def _make_ready(self, priority: int, key: Key, due: float | None = None) -> None:
        """Put a key in a lane; its wait is counted from the first time it became due (``due``: now)."""
        self._ready[priority].push(key)
        self._due_since.setdefault(key, self._clock() if due is None else due)

    def _ready_priority(self, key: Key) -> int | None:
        for priority, ready in enumerate(self._ready):
            if key in ready:
                return priority
        return None

    def _promote_due(self) -> float | None:
        """Move delayed keys that came due to the resync lane; return seconds until the next one."""
        now = self._clock()
        while self._heap:
            due, _seq, key = self._heap[0]
            if self._delayed.get(key) != due:
                heapq.heappop(self._heap)  # stale: re-scheduled or made ready since
                continue
            if due > now:
                return due - now
            heapq.heappop(self._heap)
            del self._delayed[key]
            if self._ready_priority(key) is None:
                self._make_ready(PRIORITY_RESYNC, key, due)
        return None

    def _pick(self) -> Key | None:
        """From the best lane, the oldest key whose kind has room (and is not running) of the namespace
        whose turn it is; that namespace then goes to the back in every lane. Past the global cap, only a
        spare lane's key: a namespace with nothing running, while the regular lanes' runs are stalled."""
        running = len(self._processing)
        if running >= self.global_limit + self.spare_limit:
            return None
        spare = running >= self.global_limit
        if spare and self._stalls_in() != 0.0:
            return None
        for ready in self._ready:
            key = next((k for k in ready.in_turn() if self._may_take(k, spare)), None)
            if key is not None:
                ready.remove(key)
                self._take_turn(key.namespace)
                return key
        return None

    def _may_take(self, key: Key, spare: bool = False) -> bool:
        if key in self._processing:
            return False
        if spare:
            return key.namespace not in self._in_namespace
        return self._running[key.gvk] < self.per_kind_limits.get(key.gvk, 1)

    def _stalls_in(self) -> float | None:
        """Seconds until ``global_limit`` runs in progress will each have been going ``STALLED_AFTER``
        seconds (0.0: they have), or None when spare lanes cannot open (none, or too few runs)."""
        if not self.spare_limit or len(self._processing) < self.global_limit:
            return None
        oldest = sorted(self._processing.values())[self.global_limit - 1]
        return max(0.0, oldest + STALLED_AFTER - self._clock())

    def _last_turn(self, namespace: str) -> int:
        return self._turns.get(namespace, -1)  # never served (or long ago): before everyone

    def _take_turn(self, namespace: str) -> None:
        self._turns[namespace] = next(self._turn)
        self._turns.move_to_end(namespace)
        for ready in self._ready:
            ready.to_back(namespace)
        if len(self._turns) > 2 * TURNS_REMEMBERED:  # now and then, so the cost is spread thin
            waiting = {ns for ready in self._ready for ns in ready.namespaces()}
            recent = set(itertools.islice(reversed(self._turns), TURNS_REMEMBERED))
            self._turns = OrderedDict((ns, t) for ns, t in self._turns.items() if ns in waiting or ns in recent)

    def _refresh_gauges(self) -> None:
        ready: Counter[str] = Counter()
        for lane in self._ready:
            ready.update(k.gvk for k in lane)
        delayed = Counter(k.gvk for k in self._delayed)
        for gvk in set(self.per_kind_limits) | set(ready) | set(delayed):
            metrics.QUEUE_DEPTH.labels(gvk).set(ready[gvk])
            metrics.QUEUE_DELAYED.labels(gvk).set(delayed[gvk])
            metrics.IN_FLIGHT.labels(gvk).set(self._running[gvk])
        failing: Counter[str] = Counter(k.gvk for k in self._failing_since)
        oldest: dict[str, float] = {}
        for key, since in self._failing_since.items():
            oldest[key.gvk] = min(since, oldest.get(key.gvk, since))
        for gvk in set(self.per_kind_limits) | set(failing):
            metrics.FAILING_OBJECTS.labels(gvk).set(failing[gvk])
            metrics.FAILING_SINCE.labels(gvk).set(oldest.get(gvk, 0.0))

    # -- lifecycle -------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def depth(self) -> int:
        """Keys waiting, due now or later."""
        with self._cond:
            return sum(len(r) for r in self._ready) + len(self._delayed) + len(self._dirty)

    def processing(self) -> int:
        with self._cond:
            return len(self._processing)


class _Lane:
    """The due keys of one priority: a FIFO per namespace, the namespaces least recently served first.

    ``last_turn`` gives each namespace's rank; the order stays sorted by it because a namespace's rank only
    changes when it takes a turn, and then it goes to the back. Not thread-safe: the queue's lock.
    """

    def __init__(self, last_turn: Callable[[str], int]) -> None:
        self._last_turn = last_turn
        self._fifos: dict[str, OrderedDict[Key, None]] = {}
        self._order: list[str] = []  # namespaces with keys here, in turn order
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def __contains__(self, key: Key) -> bool:
        fifo = self._fifos.get(key.namespace)
        return fifo is not None and key in fifo

    def __iter__(self) -> Iterator[Key]:
        return self.in_turn()

    def in_turn(self) -> Iterator[Key]:
        """Every key: the namespaces in turn order, each one's keys oldest first."""
        for namespace in self._order:
            yield from self._fifos[namespace]

    def namespaces(self) -> list[str]:
        return list(self._order)

    def push(self, key: Key) -> None:
        fifo = self._fifos.get(key.namespace)
        if fifo is None:
            fifo = self._fifos[key.namespace] = OrderedDict()
            # After every namespace served no later than this one: a newcomer goes before a namespace that
            # has just had its turn, and after those waiting longer than it.
            at = bisect.bisect_right(self._order, self._last_turn(key.namespace), key=self._last_turn)
            self._order.insert(at, key.namespace)
        if key not in fifo:
            fifo[key] = None
            self._size += 1

    def remove(self, key: Key) -> None:
        fifo = self._fifos.get(key.namespace)
        if fifo is None or key not in fifo:
            return
        del fifo[key]
        self._size -= 1
        if not fifo:
            del self._fifos[key.namespace]
            self._order.remove(key.namespace)

    def to_back(self, namespace: str) -> None:
        if namespace in self._fifos:
            self._order.remove(namespace)
            self._order.append(namespace)
