"""List-then-watch one kind in one namespace (or all), keeping a local copy of every object.

One ``Informer`` per (kind, namespace) runs in its own thread from ``start`` to ``stop`` (a
``lifecycle.Runnable``), started by the reactor's watched kinds (``reactor.kinds``) and dependent watches.
It lists (paginated), then watches from the list's resourceVersion with bookmarks, resumes from the last
resourceVersion it saw when a stream ends or the network fails (with capped backoff), and lists again when
the server answers 410 Gone. On a re-list it reports the differences (objects gone meanwhile come out as
DELETED). Every change goes to ``on_event(type, old, new)``.

What it keeps (``storing``): each object without ``metadata.managedFields``, as compact JSON decoded again at
every lookup, so no caller can change the store. Of each object it keeps what ``keep`` returns for it (the
object itself by default): the watched kinds keep only a small stub of an object over the entry bound
(``objects.bounded``), so a tenant's huge object costs its decoding once, not its size for as long as it
exists; a dependent kind whose body nothing reads keeps its metadata and digests, and its informer is not
``full``: the run proxy never answers a read from it. A list page whose body passes ``MAX_PAGE_BYTES`` is
asked for again in smaller pages before it is decoded (decoding costs many times the body's size), down
to one object a page.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from hybrid_operator import metrics
from hybrid_operator.kube import storing
from hybrid_operator.kube.client import ApiError, Kube, KubeObject, Resource, TooLarge
from hybrid_operator.kube.objects import key_of, meta_of, resource_version_of
from hybrid_operator.lifecycle import Loop

log = logging.getLogger(__name__)

WATCH_SECONDS = 35  # the server ends each watch after 25-35 s
READ_TIMEOUT = 45  # seconds without a byte before a watch connection is taken for dead
STALE_AFTER = 120  # seconds without progress before /readyz says so
MAX_PAGE_BYTES = 4 << 20  # a list page's body past which it is asked for again in smaller pages

EventHandler = Callable[[str, KubeObject | None, KubeObject], None]
Keep = Callable[[KubeObject], KubeObject]  # what is stored of an object (its projection)


class Informer:
    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        on_event: EventHandler,
        *,
        namespace: str = "",
        label_selector: str = "",
        page_size: int = 500,
        backoff_cap: float = 30.0,
        stopping: threading.Event | None = None,
        keep: Keep | None = None,
        full: bool = True,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.page_size = page_size
        self.backoff_cap = backoff_cap
        self.on_event = on_event
        self.keep = keep
        self.full = full  # what ``keep`` keeps is the whole object (the run proxy may answer reads from it)
        self.synced = threading.Event()
        self._store = storing.Store()
        self._lock = threading.Lock()
        self._rv = ""
        self._gvk = str(resource.gvk)
        self._failures = 0  # consecutive failed lists or watches
        self._progress = time.monotonic()  # last time a list, a watch or an event got through
        self._last_error = ""
        self._delivered = False  # the current (or last) watch handed on at least one event or bookmark
        # ``stopping``: its owner's event, which stops all of the owner's informers at once.
        self._loop = Loop(f"watch-{resource.gvk.kind}-{namespace or 'all'}", self.run, stopping)

    # -- the lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._loop.start()

    def stop(self, deadline: float | None = None) -> bool:
        """Stop after the current request: a watch ends within ``READ_TIMEOUT``, never waited for here."""
        self._loop.stopping.set()
        return True

    def ready(self) -> tuple[bool, str]:
        if not self.synced.is_set():
            return False, "not synced yet"
        return self.health()

    # -- the store -------------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> KubeObject | None:
        """The cached object (a fresh copy), or None."""
        with self._lock:
            stored = self._store.raw((namespace, name))
        return None if stored is None else storing.decode(stored)

    def raw(self, namespace: str, name: str) -> bytes | KubeObject | None:
        """The cached object as stored (``storing.as_json`` makes it the run proxy's answer), or None."""
        with self._lock:
            return self._store.raw((namespace, name))

    def objects(self) -> list[KubeObject]:
        """A snapshot of every cached object (fresh copies)."""
        with self._lock:
            stored = self._store.items()
        return [storing.decode(value) for _key, value in stored]

    def snapshot(self) -> tuple[list[KubeObject], str]:
        """Every cached object and the resourceVersion the store is at, taken together (fresh copies)."""
        stored, rv = self.raw_snapshot()
        return [storing.decode(value) for _key, value in stored], rv

    def raw_snapshot(self) -> tuple[list[tuple[tuple[str, str], bytes | KubeObject]], str]:
        """Every cached object's key and stored form, and the resourceVersion the store is at, taken together."""
        with self._lock:
            return self._store.items(), self._rv

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)

    def health(self, threshold: int = 3) -> tuple[bool, str]:
        """Failing once is normal (a stream ends, the server restarts); failing ``threshold`` times in a row
        is not, and the reason is what the probe shows."""
        where = f"{self._gvk} in {self.namespace or 'all namespaces'}"
        if self._failures >= threshold:
            return False, f"watch of {where} failed {self._failures} times in a row: {self._last_error}"
        silent = time.monotonic() - self._progress
        if silent > STALE_AFTER:
            return False, f"watch of {where} has made no progress for {silent:.0f}s"
        return True, "ok"

    # -- the loop --------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        failures = 0
        gone_in_a_row = 0  # 410s with nothing delivered between them: a server that keeps expiring us
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    self._relist()
                    need_list = False
                self._watch(stop)
                failures = self._failures = gone_in_a_row = 0
            except ApiError as exc:
                if exc.gone:
                    metrics.WATCH_RESTARTS.labels(self._gvk, "expired").inc()
                    need_list = True
                    gone_in_a_row = 0 if self._delivered else gone_in_a_row + 1
                    if gone_in_a_row < 2:  # normal: the watch fell behind compaction once; list at once
                        log.info("watch expired, listing again", extra={"gvk": self._gvk})
                        continue
                    # Expired again before a single event since the last list: a full list per turn
                    # would hammer the API server, so wait as after a failure.
                    delay = self._backoff(gone_in_a_row) * random.uniform(0.8, 1.2)
                    log.warning(
                        "watch expired %d times in a row without an event, listing again in %.1fs",
                        gone_in_a_row,
                        delay,
                        extra={"gvk": self._gvk},
                    )
                    stop.wait(delay)
                    continue
                failures = self._failed(str(exc))
                metrics.WATCH_RESTARTS.labels(self._gvk, "error").inc()
                delay = self._backoff(failures) * random.uniform(0.8, 1.2)
                log.warning("watch failed, retrying in %.1fs: %s", delay, exc, extra={"gvk": self._gvk})
                stop.wait(delay)
            except Exception as exc:  # never let a watch thread die silently
                failures = self._failed(repr(exc)[:500])
                metrics.WATCH_RESTARTS.labels(self._gvk, "error").inc()
                log.exception("watch crashed, restarting", extra={"gvk": self._gvk})
                need_list = True
                stop.wait(self._backoff(failures))

    def _backoff(self, in_a_row: int) -> float:
        """Half a second, doubled each time in a row, up to the cap. The exponent stops growing long before
        2**n would overflow a float (at 1,024 failures: the watch thread would die of the arithmetic)."""
        return min(self.backoff_cap, 0.5 * 2.0 ** min(in_a_row, 64))

    def _failed(self, error: str) -> int:
        self._failures += 1
        self._last_error = error
        return self._failures

    def _emit(self, event_type: str, old: KubeObject | None, new: KubeObject) -> None:
        """Hand one change on; a handler that fails on one object must not stop the kind."""
        try:
            self.on_event(event_type, old, new)
        except Exception:
            namespace, name = key_of(new)
            log.exception(
                "handling %s %s/%s failed; skipping it",
                event_type,
                namespace,
                name,
                extra={"fields": {"kind": self._gvk, "namespace": namespace, "name": name}},
            )

    def _kept(self, obj: KubeObject) -> KubeObject:
        """What is stored and handed on of a decoded object: never its managedFields, and with ``keep``
        only its projection."""
        storing.strip(obj)
        return obj if self.keep is None else self.keep(obj)

    def _relist(self) -> None:
        # Each page is encoded into the new store as it arrives, so only one page is ever decoded at once:
        # a list of 10,000 objects must not cost 10,000 decoded objects, even for a moment.
        fresh = storing.Store()
        token = ""
        limit = self.page_size
        while True:
            try:
                page = self.kube.request(
                    "GET",
                    self.resource.path(self.namespace or None),
                    query={"limit": limit, "continue": token, "labelSelector": self.label_selector},
                    timeout=60,
                    max_bytes=MAX_PAGE_BYTES if limit > 1 else None,
                )
            except TooLarge:
                limit = max(1, limit // 4)  # the same page again, fewer objects at a time
                continue
            for item in page.get("items", []):
                item.setdefault("apiVersion", self.resource.gvk.api_version)
                item.setdefault("kind", self.resource.gvk.kind)
                fresh.put(key_of(item), self._kept(item))
            page.pop("items", None)  # what was not kept is freed before the next page
            token = meta_of(page).get("continue") or ""
            if not token:
                break
            limit = self.page_size
        with self._lock:
            old_store, self._store = self._store, fresh
            self._rv = resource_version_of(page)
        for key, gone in old_store.items():
            if key not in fresh:
                last = storing.decode(gone)
                self._emit("DELETED", last, last)
        for key, stored in fresh.items():
            before = old_store.raw(key)
            old = None if before is None else storing.decode(before)
            self._emit("MODIFIED" if before is not None else "ADDED", old, storing.decode(stored))
        if not self.synced.is_set():
            log.info("synced %d objects", len(fresh), extra={"gvk": self._gvk, "namespace": self.namespace})
        self.synced.set()
        self._failures = 0
        self._progress = time.monotonic()

    def _watch(self, stop: threading.Event) -> None:
        # Short watches with a read timeout just above them: a connection that went silent (and so never
        # says it died) is given up within READ_TIMEOUT seconds, not after minutes. Resuming from the last
        # resourceVersion costs one request; the spread keeps many informers from re-watching together.
        timeout = random.randint(WATCH_SECONDS - 10, WATCH_SECONDS)
        self._progress = time.monotonic()
        query: dict[str, Any] = {
            "resourceVersion": self._rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout,
            "labelSelector": self.label_selector,
        }
        self._delivered = False
        for event in self.kube.stream(self.resource.path(self.namespace or None), query, READ_TIMEOUT):
            self._progress = time.monotonic()
            if stop.is_set():
                return
            self._delivered = self._delivered or event.get("type") != "ERROR"
            event_type, obj = event.get("type"), event.get("object") or {}
            if event_type == "ERROR":
                raise ApiError(int(obj.get("code") or 500), str(obj.get("reason") or ""), str(obj.get("message")))
            if event_type == "BOOKMARK":
                with self._lock:
                    self._rv = resource_version_of(obj) or self._rv
                continue
            self._apply(str(event_type), obj)

    def _apply(self, event_type: str, obj: KubeObject) -> None:
        key = key_of(obj)
        obj = self._kept(obj)
        stored = storing.encode(obj) if event_type != "DELETED" else None
        with self._lock:  # the store and its resourceVersion change together (``snapshot`` reads both)
            self._rv = resource_version_of(obj) or self._rv
            before = self._store.pop(key) if stored is None else self._store.raw(key)
            if stored is not None:
                self._store.set(key, stored)
        self._emit(event_type, None if before is None else storing.decode(before), obj)
