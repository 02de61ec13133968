"""``hybrid-operator reconcile FILE``: one reconcile of the custom resource in a file, without watching.

Called by ``cli``, for role authors iterating on a role and for the CI of their roles. It builds what ``run``
builds (``wiring``: the executor, the owner-reference proxy, the ``Reconciler``) for the one kind the file's
object is, started and stopped by a ``lifecycle`` of its own, and then:

- without ``check``: applies the object with server-side apply (field manager
  ``hybrid-operator-reconcile``: created if missing, its fields made what the file says, others' fields
  kept), then reconciles it once exactly as the operator would: finalizer, Running, the run, status,
  Events;
- with ``check``: asks the API server what the object would be (the same apply as a dry run: validated
  and defaulted, nothing stored), runs the role on that in Ansible's check mode (the executor is built
  with ``--check``) and reports the status the operator would write. Nothing is written.

The file is untrusted input like any custom resource: read with the bounded reader of ``yamlfiles`` (size,
UTF-8, depth, no anchors or aliases, JSON's types only), then as one document with apiVersion, kind and
metadata.name, and refused naming the field. Exit codes: 0 the run succeeded, 1 it failed, 2 bad input (the
file, a kind no watch maps, a CRD not installed, an object the API server or the operator refuses).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybrid_operator.errors import ConfigError
from hybrid_operator.kube.client import ApiError, Kube, KubeObject, Resource, context_namespace
from hybrid_operator.kube.objects import GVK, conditions_of, meta_of, name_of
from hybrid_operator.kube.patching import merge_patch
from hybrid_operator.lifecycle import Lifecycle
from hybrid_operator.reactor.admitting import MAX_DEPTH
from hybrid_operator.reactor.queueing import Key
from hybrid_operator.reactor.reconciling import KindContext, Reconciler
from hybrid_operator.reactor.wiring import build_runtime, kind_context
from hybrid_operator.settings import yamlfiles
from hybrid_operator.settings.config import Config
from hybrid_operator.settings.watches import Watch

FIELD_MANAGER = "hybrid-operator-reconcile"
MAX_FILE_BYTES = 3 << 20  # the API server's own limit on a request body is 3 MiB


@dataclass(frozen=True)
class Once:
    """How the one reconcile ended: the exit code, the status (written, or that would be), and why."""

    code: int
    status: dict[str, Any] = field(default_factory=dict)
    message: str = ""


def load_object(path: Path) -> KubeObject:
    """The one custom resource in ``path``; ``ConfigError`` naming what is wrong with it."""
    # The same bounded reader as watches.yaml: a few hundred bytes of YAML aliases ("billion laughs")
    # would otherwise expand for minutes before any check below could see the object.
    text = yamlfiles.read_text(path, limit=MAX_FILE_BYTES, what="custom resource file")
    docs = [d for d in yamlfiles.load_documents(text, source=path, max_depth=MAX_DEPTH) if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise ConfigError(f"{path}: expected one object (a mapping), found {len(docs)} documents")
    obj: KubeObject = docs[0]
    for name in ("apiVersion", "kind"):
        if not isinstance(obj.get(name), str) or not obj[name]:
            raise ConfigError(f"{path}: field '{name}' is required, a string")
    if not name_of(obj):
        raise ConfigError(f"{path}: field 'metadata.name' is required, a string")
    try:
        json.dumps(obj, allow_nan=False)
    except (TypeError, ValueError) as exc:  # .nan and .inf: YAML has them, JSON does not
        raise ConfigError(f"{path}: not JSON the API server can take: {exc}") from exc
    return obj


def watch_for(watches: list[Watch], obj: Mapping[str, Any]) -> Watch:
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    gvk = GVK(group, version, str(obj["kind"]))
    for watch in watches:
        if watch.gvk == gvk:
            return watch
    raise ConfigError(f"no entry of the watches file maps {gvk.kind} {obj['apiVersion']}")


def reconcile_once(
    config: Config,
    watches: list[Watch],
    obj: KubeObject,
    *,
    check: bool,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> Once:
    """Apply (or, with ``check``, dry-run) ``obj`` and reconcile it once; see the module docstring."""
    watch = watch_for(watches, obj)
    kube = Kube.connect(config.watching.kubeconfig)
    try:
        resource = kube.resource(watch.gvk)
    except ApiError as exc:
        return Once(2, message=f"{exc} (install the CRDs first: make install)")
    obj = _placed(obj, resource, config)
    try:
        applied = kube.apply(resource, obj, field_manager=FIELD_MANAGER, dry_run=check)
    except ApiError as exc:
        # The object's fault, whatever the code: a wrong type in an apply comes back as a 500 ("failed to
        # create typed patch object"). Only an unreachable or overloaded server is not bad input.
        code = 1 if exc.status in (0, 429, 503, 504) else 2
        return Once(code, message=f"the API server refused the object: {exc}")
    key = Key.of(watch.gvk, applied)
    ctx = kind_context(
        config,
        watch,
        resource,
        lambda namespace, name: applied if check else kube.get_or_none(resource, namespace, name),
        reconcile_period=0,
        on_event=on_event,
    )
    with Lifecycle(config.reconciles.graceful_shutdown_timeout) as lifecycle:
        runtime = build_runtime(
            config,
            kube,
            on_child=lambda _child: None,
            extra_ansible_args="--check" if check else "",
            watches=[watch],
        )
        runtime.add_to(lifecycle)
        if not lifecycle.start_all():
            return Once(1, message="could not start the executor or the runs' API proxy (see the log above)")
        reconciler = runtime.reconciler
        return _rehearse(reconciler, key, ctx, applied) if check else _reconcile(reconciler, key, ctx, kube)


def _rehearse(reconciler: Reconciler, key: Key, ctx: KindContext, obj: KubeObject) -> Once:
    rehearsal = reconciler.rehearse(key, ctx, obj)
    status = merge_patch(obj.get("status") or {}, rehearsal.status)
    if rehearsal.refused:
        return Once(2, status, f"the operator would refuse the object ({rehearsal.refused})")
    assert rehearsal.result is not None
    if not rehearsal.result.succeeded:
        return Once(1, status, rehearsal.result.failure_message)
    return Once(0, status)


def _reconcile(reconciler: Reconciler, key: Key, ctx: KindContext, kube: Kube) -> Once:
    outcome = reconciler.reconcile(key, ctx)
    current = kube.get_or_none(ctx.resource, key.namespace, key.name) or {}
    status = current.get("status") or {}
    if outcome.refused:
        return Once(2, status, f"the operator refused the object ({outcome.refused})")
    if not outcome.succeeded:
        failures = [c for c in conditions_of(current) if c.get("type") == "Failure"]
        return Once(1, status, str(failures[0].get("message", "")) if failures else "the run failed")
    after = outcome.requeue_after
    return Once(0, status, f"the role asked to be run again after {after:g}s" if after else "")


def _placed(obj: KubeObject, resource: Resource, config: Config) -> KubeObject:
    """The object with its namespace (the kubeconfig context's, as kubectl picks it) and without status."""
    meta = dict(meta_of(obj))
    if resource.namespaced:
        meta["namespace"] = meta.get("namespace") or context_namespace(config.watching.kubeconfig)
    else:
        meta.pop("namespace", None)
    return {k: v for k, v in {**obj, "metadata": meta}.items() if k != "status"}
