"""One reconcile of one object: the road from a queued key to a written status.

Called by the workers of ``orchestration`` with a key the queue guarantees no other worker holds.
Short and linear, like sample-controller's syncHandler:

1. read the object from the watch's cache (gone: nothing to do);
2. admit it (``admitting``: depth, spec names, annotations); a refused object gets a Failure condition and
   a Warning Event naming the offending fields, and no run until it changes;
3. finalizers: add ours before the first run; on deletion run the finalizer, or skip if it is not ours;
4. on a new generation, say Running on the status;
5. run the role through the executor;
6. remove the finalizer after a successful finalizer run, or write the status (one merge patch);
7. record Events (a failed run, a recovery, what the role asked for) and decide when to come back.

``rehearse`` is steps 2 and 5 alone, for ``reconcile FILE --check`` (``oneshot``): the run, and the status
the operator would write after it, with nothing written.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from hybrid_operator import logs
from hybrid_operator.ansible.privatedirs import TempDir
from hybrid_operator.ansible.reserved import reservations
from hybrid_operator.ansible.results import RunResult
from hybrid_operator.ansible.running import Executor, RunRequest
from hybrid_operator.errors import InvalidObject, OperatorError, TemporaryError
from hybrid_operator.kube import patching
from hybrid_operator.kube.client import ApiError, Kube, KubeObject, Resource
from hybrid_operator.kube.events import EventRecorder
from hybrid_operator.kube.objects import (
    finalizers_of,
    generation_of,
    is_deleting,
    name_of,
    namespace_of,
    uid_of,
)
from hybrid_operator.kube.owners import Owner
from hybrid_operator.proxy.confining import ANYWHERE, Reach
from hybrid_operator.proxy.server import ApiProxy
from hybrid_operator.reactor import admitting
from hybrid_operator.reactor import status as status_mod
from hybrid_operator.reactor.annotations import RunSettings
from hybrid_operator.reactor.ownwrites import OwnWrites, resource_version
from hybrid_operator.reactor.queueing import Key, resync_delay
from hybrid_operator.reactor.resuming import RECORD
from hybrid_operator.settings.watches import Watch

log = logging.getLogger(__name__)

MIN_REQUEUE = 1.0  # seconds: the least requeue_after a role gets, as the reconcile-period annotation's floor
_T = TypeVar("_T")
OWNER_ENV = "HYBRID_OPERATOR_OWNER"  # tells the hybrid_operator.util plugins which object this run is for


@dataclass
class KindContext:
    """Everything the reconciler needs about one watched kind."""

    watch: Watch
    resource: Resource
    lookup: Callable[[str, str], KubeObject | None]  # (namespace, name) -> cached object
    reconcile_period: float  # seconds; 0 = no periodic reconcile
    verbosity: int = 2
    on_event: Callable[[dict[str, Any]], None] | None = None  # each run's events, as they arrive
    log_failed_output: bool = True  # log a failed run's task output (not under --ansible-log-events=nothing)
    max_entries: int = admitting.DEFAULT_MAX_ENTRIES  # --max-object-entries
    confine_runs: bool = False  # --run-namespaces: a run reaches its object's namespace and runNamespaces only
    # With skipConvergedAtStart: the status.reconciledWith a run leaves (key, the object it ran on, succeeded)
    record: Callable[[Key, KubeObject, bool], dict[str, Any] | None] | None = None


@dataclass(frozen=True)
class Outcome:
    """What the worker does with the key next."""

    succeeded: bool
    requeue_after: float | None = None  # None: do not come back unless the object changes; 0: ours, at once
    retry: bool = False  # requeue with backoff
    refused: str = ""  # the reason the object was not run (admitting), if it was not
    reason: str = ""  # why it did not succeed (the Failure reason written, RunTimedOut, the refusal's)


@dataclass(frozen=True)
class Rehearsal:
    """What ``Reconciler.rehearse`` found: the run (None if the object was refused) and the status patch."""

    result: RunResult | None
    status: dict[str, Any]
    refused: str = ""


class Reconciler:
    def __init__(self, kube: Kube, executor: Executor, recorder: EventRecorder, proxy: ApiProxy | None = None) -> None:
        self.kube = kube
        self.executor = executor
        self.recorder = recorder
        self.proxy = proxy
        self._own = OwnWrites()  # what our own last write of each object returned (``ownwrites``)
        self._floored: set[Key] = set()  # objects whose role asked for a requeue under MIN_REQUEUE (logged once)
        self._floored_lock = threading.Lock()
        # Per-run kubeconfigs hold the proxy's secret: a private dir, never the artifacts; gone at close().
        self._scratch = TempDir("hybrid-operator-runs-")
        self._kubeconfigs = self._scratch.path

    def close(self) -> None:
        """Remove the per-run kubeconfigs (the orchestration calls this when it stops)."""
        self._scratch.close()

    def reconcile(self, key: Key, ctx: KindContext) -> Outcome:
        obj = self._own.newest(key, ctx.lookup(key.namespace, key.name))
        if obj is None:
            return Outcome(succeeded=True)
        watch = ctx.watch
        try:
            settings = self._admit(ctx, obj)
        except InvalidObject as exc:
            return self._refuse(key, ctx, obj, exc)
        deleting = is_deleting(obj)
        finalizer = watch.finalizer
        if finalizer is None and deleting:
            return Outcome(succeeded=True)
        if finalizer is not None:
            present = finalizer.name in finalizers_of(obj)
            if deleting and not present:
                return Outcome(succeeded=True)
            if not deleting and not present:
                obj = patching.add_finalizer(self.kube, ctx.resource, obj, finalizer.name)
        if watch.manage_status and not deleting and _new_generation(obj):
            obj = self._write_status(ctx, obj, status_mod.running_status) or obj
        request = self._request(ctx, obj, deleting, settings)
        with logs.bind(run_id=request.run_id):
            return self._run(
                key,
                request,
                lambda result: self._after_run(key, ctx, obj, result, deleting, settings.reconcile_period),
                show_output=ctx.log_failed_output,
            )

    def rehearse(self, key: Key, ctx: KindContext, obj: KubeObject) -> Rehearsal:
        """One run on ``obj`` that writes nothing itself: no finalizer, no Running, no status, no Event.

        For ``reconcile FILE --check``, whose executor runs Ansible in check mode: the result is the run
        and the status patch the operator would write after it.
        """
        try:
            settings = self._admit(ctx, obj)
        except InvalidObject as exc:
            return Rehearsal(None, status_mod.error_status(obj, exc.message, exc.reason), exc.reason)
        deleting = is_deleting(obj)
        request = self._request(ctx, obj, deleting, settings)
        with logs.bind(run_id=request.run_id):
            result = self._run(key, request, lambda result: result, show_output=ctx.log_failed_output)
        verdict = status_mod.verdict(obj, result, manage_status=ctx.watch.manage_status)
        return Rehearsal(result, verdict.status(obj))

    def _admit(self, ctx: KindContext, obj: KubeObject) -> RunSettings:
        watch = ctx.watch
        return admitting.admit(
            obj,
            group=watch.gvk.group,
            kind=watch.gvk.kind,
            snake_case=watch.snake_case_parameters,
            ansible=reservations,
            defaults=RunSettings(ctx.reconcile_period, ctx.verbosity, watch.max_runner_artifacts),
            max_entries=ctx.max_entries,
        )

    def _run(self, key: Key, request: RunRequest, then: Callable[[RunResult], _T], *, show_output: bool = True) -> _T:
        """The executor's run, with the run's proxy token and kubeconfig gone when it ends, and ``then`` of its
        result: as soon as the executor has it (``RunRequest.on_result``: before the run's artifacts are
        written), or after the run from an executor that does not hand it on."""
        done: list[_T] = []
        released: list[bool] = []

        def release() -> None:
            if not released and self.proxy is not None:
                released.append(True)
                self.proxy.revoke(request.run_id)
                if kubeconfig := request.env.get("KUBECONFIG"):
                    Path(kubeconfig).unlink(missing_ok=True)

        def finished(result: RunResult) -> None:
            release()
            _log_run(key, result, show_output=show_output)
            done.append(then(result))

        try:
            result = self.executor.run(replace(request, on_result=finished))
        finally:
            release()
        if not done:
            finished(result)
        return done[0]

    def report(self, key: Key, ctx: KindContext, reason: str, message: str) -> None:
        """An error that will repeat until the object changes: say so on it (Failure and a Warning Event),
        as far as the API server lets us; a report that fails is logged, never raised."""
        obj = ctx.lookup(key.namespace, key.name)
        if obj is None:
            return
        message = message if len(message) <= 1000 else message[:997] + "..."
        try:
            self._write_status(ctx, obj, lambda fresh: status_mod.error_status(fresh, message, reason))
        except OperatorError as exc:
            log.warning("could not write the failure of %s on it: %s", key, exc)
        self.recorder.record(obj, "Warning", reason, message)

    def _refuse(self, key: Key, ctx: KindContext, obj: KubeObject, exc: InvalidObject) -> Outcome:
        """An object that may not run: say why on it, once per change, and do not come back on our own."""
        log.warning(
            "not running %s: %s",
            key,
            exc.message,
            extra={"fields": {"kind": key.gvk, "namespace": key.namespace, "name": key.name, "reason": exc.reason}},
        )
        self._write_status(ctx, obj, lambda fresh: status_mod.error_status(fresh, exc.message, exc.reason))
        self.recorder.record(obj, "Warning", exc.reason, exc.message)
        return Outcome(succeeded=False, refused=exc.reason, reason=exc.reason)

    def _request(self, ctx: KindContext, obj: KubeObject, deleting: bool, settings: RunSettings) -> RunRequest:
        watch = ctx.watch
        target = watch.target
        finalizer_vars: Mapping[str, Any] | None = None
        if deleting and watch.finalizer is not None:
            target = watch.finalizer.target or target
            finalizer_vars = watch.finalizer.vars
        owner = {
            "api_version": str(obj.get("apiVersion") or watch.gvk.api_version),
            "kind": str(obj.get("kind") or watch.gvk.kind),
            "name": name_of(obj),
            "namespace": namespace_of(obj),
            "uid": uid_of(obj),
        }
        run_id = secrets.token_hex(6)
        env = {OWNER_ENV: json.dumps({**owner, "apiVersion": owner["api_version"]})}
        if self.proxy is not None:
            path = self._kubeconfigs / f"{run_id}.kubeconfig"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(self.proxy.kubeconfig_for(Owner(**owner), run_id, _reach(ctx, obj)))
            env["KUBECONFIG"] = env["K8S_AUTH_KUBECONFIG"] = str(path)
        return RunRequest(
            run_id=run_id,
            group=watch.gvk.group,
            version=watch.gvk.version,
            kind=watch.gvk.kind,
            obj=obj,
            role=target.role,
            playbook=target.playbook,
            watch_vars=watch.vars,
            finalizer_vars=finalizer_vars,
            snake_case=watch.snake_case_parameters,
            mark_unsafe=watch.mark_unsafe,
            max_artifacts=settings.max_artifacts,
            verbosity=settings.verbosity,
            env=env,
            on_event=ctx.on_event,
        )

    def _after_run(
        self, key: Key, ctx: KindContext, before: KubeObject, result: RunResult, deleting: bool, period: float
    ) -> Outcome:
        watch = ctx.watch
        verdict = status_mod.verdict(before, result, manage_status=watch.manage_status)
        # A finalizer's removal must not fail on a stale copy (a conflict there would run the finalizer
        # again): read the object. The status write checks its resourceVersion, so it starts from the newest
        # copy at hand and reads the object only if that copy turns out stale.
        fresh = self._fresh(ctx, before) if deleting else self._known(key, ctx, before)
        if fresh is None or uid_of(fresh) != uid_of(before):
            # Deleted while we ran (and perhaps made again, a new object): nothing left to report.
            return Outcome(succeeded=verdict.succeeded, reason=verdict.metric_reason)
        if deleting and verdict.succeeded and watch.finalizer is not None:
            self._record_role_events(fresh, result)
            patching.remove_finalizer(self.kube, ctx.resource, fresh, watch.finalizer.name)
            return Outcome(succeeded=True)
        record = ctx.record(key, before, verdict.succeeded) if ctx.record is not None else None

        def final(cur: KubeObject) -> dict[str, Any]:
            patch = verdict.status(cur)
            if ctx.record is not None and _status_of(cur).get(RECORD) != record:
                patch[RECORD] = record  # None removes it: the next start runs the object
            return patch

        written = self._write_status(ctx, fresh, final)
        if written is not None:
            self._own.remember(key, written)
        self._record_role_events(fresh, result)
        if not verdict.succeeded:
            self.recorder.record(fresh, "Warning", verdict.reason, verdict.text)
            return Outcome(succeeded=False, retry=True, reason=verdict.metric_reason)
        if verdict.recovered:
            self.recorder.record(fresh, "Normal", "Recovered", "Reconciliation succeeded after earlier failures")
        started_deleting = not deleting and is_deleting(fresh)
        if started_deleting and watch.finalizer is not None:
            return Outcome(succeeded=True, requeue_after=0)  # deleted during the run: run the finalizer now
        # The role's own requeue is exact (floored); the periodic one falls at the object's phase of its period.
        resync = resync_delay(key, period, time.time()) if period else None
        after = [v for v in (self._requeue_floor(key, result.requeue_after), resync) if v is not None]
        return Outcome(succeeded=True, requeue_after=min(after) if after else None)

    def _requeue_floor(self, key: Key, requested: float | None) -> float | None:
        """A role's ``requeue_after``, at least ``MIN_REQUEUE`` seconds: ``"0s"`` from a spec field once looped an
        object 65 times in 30 s for as long as it existed. Said once per object, not at every loop."""
        if requested is None or requested >= MIN_REQUEUE:
            return requested
        with self._floored_lock:
            first = key not in self._floored
            if first:
                if len(self._floored) >= 10_000:
                    self._floored.clear()
                self._floored.add(key)
        if first:
            log.warning(
                "the role asked to run %s again after %.3gs; running it again after %ss, the least allowed",
                key,
                requested,
                MIN_REQUEUE,
                extra={"fields": {"kind": key.gvk, "namespace": key.namespace, "name": key.name}},
            )
        return MIN_REQUEUE

    def tidy(self) -> None:
        """Forget our own writes no watch can still be behind (the workers call this whenever they are idle)."""
        self._own.tidy()

    def _known(self, key: Key, ctx: KindContext, before: KubeObject) -> KubeObject | None:
        """The newest copy of the object at hand, with no request: the one the run started from (after our
        Running write), the watch's cache or our own last write. A role's status requests for its own object
        come back in the run's result (``k8s_status``), so most runs leave the object as it was and the cache
        is current; a stale copy costs one conflict and a read. Not in the cache (deleted, or no longer
        selected): read from the API server (None: it is gone)."""
        cached = self._own.newest(key, ctx.lookup(key.namespace, key.name))
        if cached is None:
            return self._fresh(ctx, before)
        return cached if resource_version(cached) >= resource_version(before) else before

    def _fresh(self, ctx: KindContext, before: KubeObject) -> KubeObject | None:
        return self.kube.get_or_none(ctx.resource, namespace_of(before), name_of(before))

    def _write_status(
        self, ctx: KindContext, obj: KubeObject, build: Callable[[KubeObject], dict[str, Any]]
    ) -> KubeObject | None:
        """Patch the status computed from the freshest object; on a conflict re-read and recompute."""
        current = obj
        for _attempt in range(4):
            patch = build(current)
            if not patch:
                return current
            try:
                return patching.patch_status(self.kube, ctx.resource, current, patch)
            except ApiError as exc:
                if exc.not_found:
                    return None
                if not exc.conflict:
                    raise
            fresh = self._fresh(ctx, current)
            if fresh is None:
                return None
            current = fresh
        raise TemporaryError("status kept conflicting with other writers")

    def _record_role_events(self, obj: KubeObject, result: RunResult) -> None:
        for event in result.events:
            self.recorder.record(obj, event.type, event.reason, event.message)


def _reach(ctx: KindContext, obj: KubeObject) -> Reach:
    """Where the run of ``obj`` may send requests: confined, its namespace and the watch's runNamespaces."""
    if not ctx.confine_runs:
        return ANYWHERE
    own = {namespace_of(obj)} - {""}
    return Reach(frozenset(own | ctx.watch.run_namespaces))


def _status_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _new_generation(obj: Mapping[str, Any]) -> bool:
    generation = generation_of(obj)
    observed = (obj.get("status") or {}).get("observedGeneration") if isinstance(obj.get("status"), dict) else None
    return generation is None or generation != observed


def _log_run(key: Key, result: RunResult, *, show_output: bool = True) -> None:
    fields = {
        "kind": key.gvk,
        "namespace": key.namespace,
        "name": key.name,
        "run_id": result.run_id,
        "duration": round(result.duration, 3),
        "ok": result.ok,
        "changed": result.changed,
        "failed": result.failures,
        "result": "succeeded" if result.succeeded else "failed",
    }
    if result.path:  # the warm executor's: lean, mixed or engine
        fields["path"] = result.path
    if result.loaded_ahead:
        fields["loaded_ahead"] = True
    if result.succeeded:
        log.info("reconciled", extra={"fields": fields})
    else:
        log.warning("reconcile failed: %s", result.failure_message, extra={"fields": fields})
        for task in result.failed_tasks if show_output else ():
            if task.output:
                log.warning("failed task %s output:\n%s", task.task, task.output, extra={"fields": fields})
    if show_output:
        _log_tolerated(key, result)


def _log_tolerated(key: Key, result: RunResult) -> None:
    """One line per task failure the role let pass (operator-sdk logs every failed task), at most
    ``MAX_TOLERATED_KEPT`` per run and then a count, so a role that ignores errors in a loop cannot flood."""
    base = {"kind": key.gvk, "namespace": key.namespace, "name": key.name, "run_id": result.run_id}
    for failure in result.tolerated:
        log.warning(
            "task failure let pass by the role (%s): %s",
            failure.how,
            failure.message,
            extra={"fields": {**base, "task": failure.task}},
        )
    unlisted = result.tolerated_count - len(result.tolerated)
    if unlisted > 0:
        log.warning(
            "%d more task failures let pass by the role in this run, not logged", unlisted, extra={"fields": base}
        )
