"""What the ring asks of the operator (with ``--sharding``): which cached objects a member owns, and what
to enqueue when the members change or a parked key may run.

Given to ``ring.Ring`` by ``orchestration.run_operator``: ``on_view`` enqueues what a new view gives this
replica, ``after_tick`` hands parked keys back to the queue and counts this replica's objects per kind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from hybrid_operator import metrics
from hybrid_operator.kube.objects import uid_of
from hybrid_operator.reactor.kinds import Kinds
from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, PRIORITY_RESYNC, Key, WorkQueue
from hybrid_operator.reactor.sharding import rules
from hybrid_operator.reactor.sharding.ring import Ring
from hybrid_operator.reactor.sharding.rules import Members

log = logging.getLogger(__name__)


class RingCallbacks:
    def __init__(self, kinds: Kinds, queue: WorkQueue, ring: Callable[[], Ring | None]) -> None:
        self.kinds, self.queue, self.ring = kinds, queue, ring

    def owned_keys(self, view: Members, member: str) -> dict[Key, str]:
        """Every cached object ``member`` owns under ``view``: key -> uid."""
        owned = {}
        for gvk, obj in self.kinds.objects():
            uid = uid_of(obj)
            if uid and rules.owner(uid, view) == member:
                owned[Key.of(gvk, obj)] = uid
        return owned

    def on_view(self, old: Members, new: Members) -> None:
        """Enqueue what the new view gives us that the old one did not."""
        ring = self.ring()
        if ring is None:
            return
        before = self.owned_keys(old, ring.me)
        gained = [key for key in self.owned_keys(new, ring.me) if key not in before]
        for key in gained:
            self.queue.add(key, priority=PRIORITY_RESYNC)
        log.info("ring gave this replica %d more objects", len(gained))

    def after_tick(self) -> None:
        """Hand parked keys back to the queue, and count what is ours."""
        ring = self.ring()
        if ring is None:
            return
        for key in ring.take_parked():
            self.queue.add(key, priority=PRIORITY_CHANGE)
        counts: dict[str, int] = dict.fromkeys(self.kinds.by_gvk, 0)
        for key in self.owned_keys(ring.view(), ring.me):
            counts[key.gvk] += 1
        for gvk, count in counts.items():
            metrics.SHARD_OBJECTS.labels(gvk).set(count)
