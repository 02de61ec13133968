"""The operator's own last write of each object, standing in for the watch's copy until the watch delivers it.

Where it sits: ``reconciling.Reconciler`` remembers what each status write returned (``remember``) and reads an
object through ``newest`` before a run and before its status write. A requeue soon after a write may start
before the watch has delivered that write, and must not run on the status from before it; a copy is kept for
``TTL`` seconds (oldest first), long past any watch's delay, as compact JSON without ``managedFields``: with
thousands of objects at rest the operator must not hold a second copy of each (``tidy`` drops expired ones
when a worker is idle).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from hybrid_operator.kube import storing
from hybrid_operator.kube.client import KubeObject
from hybrid_operator.kube.objects import resource_version_of
from hybrid_operator.reactor.queueing import Key

TTL = 120.0  # seconds our own write stands in for a cache that has not delivered it yet


def resource_version(obj: KubeObject) -> int:
    """resourceVersions are opaque, but etcd's are increasing integers (ASCII digits); anything else compares
    as 0."""
    raw = resource_version_of(obj)
    return int(raw) if raw.isascii() and raw.isdigit() else 0


class OwnWrites:
    """Our last write of each object, by key, for ``TTL`` seconds (see the module docstring)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[Key, tuple[float, bytes | KubeObject]] = OrderedDict()  # oldest first
        self._lock = threading.Lock()

    def newest(self, key: Key, cached: KubeObject | None) -> KubeObject | None:
        """The cached object, or our own later write of it if the watch has not caught up yet (None, the watch
        saw it deleted: our write is forgotten)."""
        with self._lock:
            entry = self._entries.pop(key, None) if cached is None else self._entries.get(key)
        mine = storing.decode(entry[1]) if entry is not None else None
        if cached is None or mine is None:
            return cached
        if resource_version(mine) > resource_version(cached):
            return mine
        with self._lock:
            self._entries.pop(key, None)  # the cache has caught up
        return cached

    def remember(self, key: Key, written: KubeObject) -> None:
        """What our write of ``key`` returned; expired entries are dropped on the way."""
        stored = storing.encode(storing.strip(written))
        with self._lock:
            self._entries[key] = (time.monotonic(), stored)
            self._entries.move_to_end(key)
        self.tidy()

    def tidy(self) -> None:
        """Forget writes older than ``TTL``."""
        now = time.monotonic()
        with self._lock:
            while self._entries:
                _oldest, (at, _stored) = next(iter(self._entries.items()))
                if now - at <= TTL:
                    break
                self._entries.popitem(last=False)

    def keys(self) -> list[Key]:
        """The objects whose write is remembered, oldest first."""
        with self._lock:
            return list(self._entries)

    def stored(self, key: Key) -> bytes | KubeObject | None:
        """The remembered write of ``key``, as kept (compact JSON; the object itself if too deep for it)."""
        with self._lock:
            entry = self._entries.get(key)
        return entry[1] if entry is not None else None
