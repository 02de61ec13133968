"""The watched kinds: each resolved through discovery, watched by one informer per namespace, events to keys.

Built by ``orchestration``, started and stopped by the lifecycle with what only the leader runs (a
``lifecycle.Runnable``, after the workers). Each kind starts on its own: ``_start_kind`` waits (with
backoff) for a CRD that is not installed yet, starts the kind's informers, and turns their events into queue
keys: a new object, a new generation, a deletion mark, or (when asked) an annotation change; status-only
updates, including our own, never wake an object. With ``--sharding`` an object the ring does not give this
replica stays in the cache only. A watch with ``skipConvergedAtStart`` hands a listed object that its record
says is converged to ``resuming`` instead of the queue. ``watches_synced`` is the ``/readyz`` check of all
of it.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator import eventlog
from hybrid_operator.errors import OperatorError
from hybrid_operator.kube.client import ApiError, Kube, KubeObject, Resource
from hybrid_operator.kube.objects import bounded, uid_of
from hybrid_operator.kube.watching import Informer
from hybrid_operator.lifecycle import Loop
from hybrid_operator.proxy.cachereads import Caches
from hybrid_operator.reactor.filtering import event_priority, wants_reconcile
from hybrid_operator.reactor.queueing import Key, WorkQueue
from hybrid_operator.reactor.reconciling import KindContext
from hybrid_operator.reactor.resuming import Resumer
from hybrid_operator.reactor.wiring import kind_context
from hybrid_operator.settings.config import Config
from hybrid_operator.settings.watches import Watch

log = logging.getLogger(__name__)


@dataclass
class Kind:
    ctx: KindContext  # its lookup reads the informers below
    informers: dict[str, Informer] = field(default_factory=dict)  # namespace ("" = all) -> informer

    def uid(self, namespace: str, name: str) -> str | None:
        obj = self.ctx.lookup(namespace, name)
        return uid_of(obj) or None if obj else None


def cache_lookup(informers: dict[str, Informer]) -> Callable[[str, str], KubeObject | None]:
    """(namespace, name) -> the object in the informers' caches (the all-namespaces one, if that is it)."""

    def lookup(namespace: str, name: str) -> KubeObject | None:
        informer = informers.get(namespace) or informers.get("")
        return informer.get(namespace, name) if informer else None

    return lookup


class Kinds:
    """Every kind of watches.yaml this operator serves, keyed by ``str(GVK)`` once it is resolved."""

    def __init__(
        self,
        config: Config,
        watches: list[Watch],
        kube: Kube,
        queue: WorkQueue,
        caches: Caches,
        stop: threading.Event,
        owns: Callable[[str], bool],
        resumer: Resumer | None = None,
    ) -> None:
        self.config, self.watches, self.kube, self.queue, self.caches = config, watches, kube, queue, caches
        self.stopping = stop
        self.owns = owns  # uid -> whether this replica runs it (always true without sharding)
        self.resumer = resumer  # with skipConvergedAtStart: records runs, holds back converged objects
        self.by_gvk: dict[str, Kind] = {}
        self._starters = [Loop(f"start-{w.gvk.kind}", functools.partial(self._start_kind_safely, w)) for w in watches]

    # -- the lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Each kind in its own thread: a kind whose CRD is missing waits alone."""
        for starter in self._starters:
            starter.start()
        log.info(
            "started: %d kinds, up to %d reconciles at once",
            len(self.watches),
            self.config.reconciles.max_concurrent_total,
        )

    def stop(self, deadline: float) -> bool:
        """Stop resolving and watching (the informers share ``stopping``); a watch's request is not waited for."""
        self.stopping.set()
        return True

    def ready(self) -> tuple[bool, str]:
        return self.watches_synced()

    def get(self, gvk: str) -> Kind | None:
        return self.by_gvk.get(gvk)

    def objects(self) -> Iterator[tuple[str, KubeObject]]:
        """Every cached object of every kind, with its kind's ``str(GVK)``."""
        for gvk, kind in list(self.by_gvk.items()):
            for informer in list(kind.informers.values()):
                for obj in informer.objects():
                    yield gvk, obj

    def _start_kind_safely(self, watch: Watch, _stopping: threading.Event) -> None:
        try:
            self._start_kind(watch)
        except OperatorError as exc:
            log.info("not watching %s: %s", watch.gvk, exc)

    def _start_kind(self, watch: Watch) -> None:
        resource = self._discover(watch)
        gvk = str(watch.gvk)
        informers: dict[str, Informer] = {}  # filled below; the context's lookup reads it
        on_event = eventlog.event_logger(self.config.logging.run_events)
        kind = Kind(kind_context(self.config, watch, resource, cache_lookup(informers), on_event=on_event), informers)
        resumes = self.resumer is not None and self.resumer.enabled(watch, resource)
        if resumes:
            kind.ctx.record = functools.partial(self._record, watch)
        namespaces = (
            self.config.watching.namespaces if resource.namespaced and self.config.watching.namespaces else ("",)
        )
        for namespace in namespaces:
            informers[namespace] = Informer(
                self.kube,
                resource,
                self._handler(watch, gvk, kind if resumes else None),
                namespace=namespace,
                label_selector=watch.selector,
                keep=functools.partial(bounded, limit=self.config.watching.max_object_entries),
                stopping=self.stopping,
            )
        for informer in informers.values():
            self.caches.add(informer)
        self.by_gvk[gvk] = kind  # before any event can reach a worker
        for informer in informers.values():
            informer.start()
        log.info(
            "watching %s (%s) in %s with %s, %d at once",
            gvk,
            resource.plural,
            ", ".join(namespaces) if namespaces != ("",) else "all namespaces",
            watch.target.describe(),
            self.config.reconciles.concurrency(watch.gvk),
        )

    def _discover(self, watch: Watch) -> Resource:
        delay = 1.0
        while True:
            try:
                return self.kube.resource(watch.gvk)
            except ApiError as exc:
                if self.stopping.is_set():
                    raise OperatorError("stopped while waiting for the API server") from exc
                log.warning("cannot resolve %s yet (%s); retrying in %.0fs", watch.gvk, exc, delay)
                self.stopping.wait(delay)
                delay = min(30.0, delay * 2)

    def _record(self, watch: Watch, key: Key, obj: KubeObject, succeeded: bool) -> dict[str, Any] | None:
        assert self.resumer is not None
        return self.resumer.record(watch, key, obj, succeeded)

    def _handler(
        self, watch: Watch, gvk: str, resumed: Kind | None
    ) -> Callable[[str, KubeObject | None, KubeObject], None]:
        """``resumed``: the kind, when its watch skips converged objects at start-up."""

        def handle(event_type: str, old: KubeObject | None, new: KubeObject) -> None:
            key = Key.of(gvk, new)
            if event_type == "DELETED":
                self.queue.discard(key)
            elif not self.owns(uid_of(new)):
                return  # another replica's object: it stays in our cache only
            elif wants_reconcile(watch, event_type, old, new) and not self._held(watch, resumed, event_type, key, new):
                self.queue.add(key, priority=event_priority(event_type, new))

        return handle

    def _held(self, watch: Watch, resumed: Kind | None, event_type: str, key: Key, obj: KubeObject) -> bool:
        """A listed object its record says was converged: held back to be checked, then skipped or run."""
        if event_type != "ADDED" or resumed is None or self.resumer is None:
            return False
        return self.resumer.hold(watch, key, obj, resumed.ctx.reconcile_period)

    def watches_synced(self) -> tuple[bool, str]:
        """Every kind resolved, every informer healthy and synced (the ``/readyz`` check, once started)."""
        unresolved = [str(w.gvk) for w in self.watches if str(w.gvk) not in self.by_gvk]
        if unresolved:
            return False, "kinds not served by the API server yet: " + ", ".join(unresolved)
        failing = [
            detail
            for kind in self.by_gvk.values()
            for inf in kind.informers.values()
            for ok, detail in [inf.health()]
            if not ok
        ]
        if failing:
            return False, "; ".join(failing)
        waiting = [
            f"{gvk}/{ns or '*'}"
            for gvk, kind in self.by_gvk.items()
            for ns, inf in kind.informers.items()
            if not inf.synced.is_set()
        ]
        if waiting:
            return False, "not synced yet: " + ", ".join(waiting)
        return True, f"{sum(len(k.informers) for k in self.by_gvk.values())} watches synced"
