"""The work queue between the watches and the workers.

Semantics (client-go's workqueue, plus what operator-sdk lacks):

- an object is identified by its ``Key``; adding a key that is already waiting collapses into one entry
  (the run will read the object's latest state), and its due time moves earlier, never later;
- a key being processed is never handed to a second worker: if it is added meanwhile it is marked dirty
  and comes back once the first run is done;
- failures are requeued with per-key exponential backoff, capped; success forgets the count;
- a concurrency cap per kind **and** a global cap across kinds (operator-sdk#3585);
- changes seen by a watch go before periodic resyncs and retries, so thousands of idle objects coming
  due never starve a new one (operator-sdk#1978, #5246).

Called by the watch handlers (``add``) and the workers (``get`` / ``done``) of ``orchestration``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hybrid_operator import metrics

PRIORITY_CHANGE = 0  # a watch saw the object change
PRIORITY_RESYNC = 1  # periodic reconcile, requeue_after, retry


@dataclass(frozen=True, order=True)
class Key:
    gvk: str  # str(GVK)
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.gvk} {self.namespace}/{self.name}" if self.namespace else f"{self.gvk} {self.name}"


class WorkQueue:
    def __init__(
        self,
        *,
        global_limit: int,
        per_kind_limits: Mapping[str, int],
        backoff_base: float = 1.0,
        backoff_cap: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.global_limit = global_limit
        self.per_kind_limits = dict(per_kind_limits)
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._clock = clock
        self._cond = threading.Condition()
        self._delayed: dict[Key, float] = {}  # key -> due time (the truth; the heap may be stale)
        self._heap: list[tuple[float, int, Key]] = []
        self._seq = itertools.count()
        # Due keys, FIFO within a priority; a key is in at most one of them and never also delayed.
        self._ready: list[OrderedDict[Key, None]] = [OrderedDict(), OrderedDict()]
        self._processing: set[Key] = set()
        self._dirty: dict[Key, int] = {}  # added while processing -> priority
        self._running: Counter[str] = Counter()
        self._failures: Counter[Key] = Counter()
        self._shutdown = False

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
                    del self._ready[queued][key]
                    self._ready[priority][key] = None
                return
            if delay <= 0:
                self._delayed.pop(key, None)
                self._ready[priority][key] = None
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
            delay = float(min(self.backoff_cap, self.backoff_base * 2 ** (self._failures[key] - 1)))
            delay = max(delay, min(at_least, self.backoff_cap))
        metrics.RETRIES.labels(key.gvk).inc()
        self.add(key, delay=delay, priority=PRIORITY_RESYNC)
        return delay

    def forget(self, key: Key) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: Key) -> int:
        with self._cond:
            return self._failures[key]

    def discard(self, key: Key) -> None:
        """Drop a waiting key (its object is gone)."""
        with self._cond:
            self._delayed.pop(key, None)
            for ready in self._ready:
                ready.pop(key, None)
            self._failures.pop(key, None)
            self._dirty.pop(key, None)

    # -- consumers -------------------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> Key | None:
        """Block until a key is due and its kind (and the whole operator) is under its cap."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while not self._shutdown:
                wait = self._promote_due()
                key = self._pick()
                if key is not None:
                    self._processing.add(key)
                    self._running[key.gvk] += 1
                    self._refresh_gauges()
                    return key
                if deadline is not None:
                    remaining = deadline - self._clock()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._cond.wait(wait)
            return None

    def done(self, key: Key) -> None:
        with self._cond:
            self._processing.discard(key)
            self._running[key.gvk] -= 1
            priority = self._dirty.pop(key, None)
            if priority is not None:
                queued = self._ready_priority(key)
                if queued is None or priority < queued:
                    if queued is not None:
                        del self._ready[queued][key]
                    self._delayed.pop(key, None)
                    self._ready[priority][key] = None
            self._refresh_gauges()
            self._cond.notify_all()

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
                self._ready[PRIORITY_RESYNC][key] = None
        return None

    def _pick(self) -> Key | None:
        """The oldest ready key of the best lane whose kind has room (and is not running)."""
        if sum(self._running.values()) >= self.global_limit:
            return None
        for ready in self._ready:
            for key in ready:
                if key in self._processing:
                    continue
                if self._running[key.gvk] >= self.per_kind_limits.get(key.gvk, 1):
                    continue
                del ready[key]
                return key
        return None

    def _refresh_gauges(self) -> None:
        ready: Counter[str] = Counter()
        for lane in self._ready:
            ready.update(k.gvk for k in lane)
        delayed = Counter(k.gvk for k in self._delayed)
        for gvk in set(self.per_kind_limits) | set(ready) | set(delayed):
            metrics.QUEUE_DEPTH.labels(gvk).set(ready[gvk])
            metrics.QUEUE_DELAYED.labels(gvk).set(delayed[gvk])
            metrics.IN_FLIGHT.labels(gvk).set(self._running[gvk])

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
