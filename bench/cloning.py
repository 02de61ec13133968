"""The restart scenario's world made by copying: N converged Foos without N runs.

``restarting`` needs N Foos that look exactly as our operator's runs leave them. Running all N takes
801 s per 1,000 on 2 cores, over two hours for 10,000; so with ``--restart-world cloned`` (the default)
``restarting`` converges only ``TEMPLATES`` Foos with the real operator (``warm-skip``, whose runs write the
records ``skipConvergedAtStart`` reads) and this module makes the others as copies of them:

1. each Foo is created through the API, as ``scenarios.foo_body`` makes it;
2. its Deployment is created as the foo role makes it: a converged Deployment's declared part (labels,
   the ``last-applied-configuration`` annotation of the role's client-side apply, owner reference, spec)
   with the Foo's name and uid in place of the template's (``clone_deployment``);
3. once every Deployment has its replica available, each Foo's status is written through the status
   subresource as a run leaves it: a converged Foo's status (conditions, ``ansibleResult``,
   ``availableReplicas``) with its own generation and ``status.reconciledWith``: the template's record
   (its content digest: the same watch, role and operator) with the Foo's generation and the digest of its
   children as the operator computes it, ``DependentWatches.children_digest`` fed with the Deployments
   the API server returned (``children_digests``). That function is checked first against the records
   the real runs left on the templates: a copy is only made if it agrees with all of them.

Whether the copies are right is then seen from outside: ``restarting`` starts ``warm-skip`` on the world,
which must report every Foo ``skipped`` (none drifted or unverified), and ``warm``, which runs them all
again, must leave every Deployment as it found it (``restarting`` counts those it changed).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from kubernetes.client.exceptions import ApiException

from bench.cluster import FOO, Cluster, Obj
from bench.scenarios import Result, foo_body, say
from hybrid_operator.kube.client import Resource
from hybrid_operator.kube.objects import GVK
from hybrid_operator.kube.watching import Informer
from hybrid_operator.reactor.dependents import DependentWatches, metadata_only
from hybrid_operator.reactor.queueing import Key, WorkQueue
from hybrid_operator.reactor.resuming import RECORD, parse_record
from hybrid_operator.settings.watches import Watch, load_watches

TEMPLATES = 20  # Foos converged by real runs; the others are copies of them
WORKERS = 16  # concurrent API calls while copying
DEPLOYMENT = GVK("apps", "v1", "Deployment")
# Metadata the API server or the controllers set: never part of what the role sends.
_SERVER_SET = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")
_CONTROLLER_ANNOTATIONS = ("deployment.kubernetes.io/revision",)

T = TypeVar("T")
R = TypeVar("R")


# -- what a copy is (pure) ----------------------------------------------------------------------------------


def _renamed(value: T, swaps: dict[str, str]) -> T:
    """``value`` (JSON) with every occurrence of each key of ``swaps`` in its strings replaced."""
    text = json.dumps(value)
    for old, new in swaps.items():
        text = text.replace(old, new)
    result: T = json.loads(text)
    return result


def clone_deployment(template: Obj, template_foo: Obj, foo: Obj) -> Obj:
    """The Deployment the foo role would make for ``foo``, from the one it made for ``template_foo``: its
    declared part (what the role's apply sent, and the apply's own annotation) with the name and uid
    swapped. Names must not contain one another (the bench's are fixed width: ``foo-00042``)."""
    old_meta, new_meta = template_foo["metadata"], foo["metadata"]
    swaps = {old_meta["uid"]: new_meta["uid"]}
    swaps[template_foo["spec"]["deploymentName"]] = foo["spec"]["deploymentName"]
    swaps[old_meta["name"]] = new_meta["name"]
    meta = {k: v for k, v in template["metadata"].items() if k not in _SERVER_SET}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _CONTROLLER_ANNOTATIONS}
    meta["annotations"] = annotations
    if not annotations:
        del meta["annotations"]
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": template["spec"]}
    return _renamed(body, swaps)


def clone_status(template_foo: Obj, foo: Obj, children: str) -> Obj:
    """``foo``'s status as a successful run leaves it: the template's, with the name swapped, the Foo's own
    generation, and its record naming that generation and ``children``, the digest of its children."""
    status: Obj = copy.deepcopy(template_foo.get("status") or {})
    record = parse_record(status)
    if record is None:
        raise ValueError(f"{template_foo['metadata']['name']} has no status.{RECORD} to copy")
    status.pop(RECORD)
    status = _renamed(status, {template_foo["metadata"]["name"]: foo["metadata"]["name"]})
    generation = int(foo["metadata"]["generation"])
    if "observedGeneration" in status:
        status["observedGeneration"] = generation
    status[RECORD] = {**record.as_status(), "generation": generation, "children": children}
    return status


def children_digests(watch: Watch, deployments: Iterable[Obj], owners: Iterable[Key]) -> dict[Key, str]:
    """``DependentWatches.children_digest`` of each owner, with the operator's own index and informer fed
    ``deployments`` as the API server returned them (no API server is asked)."""
    deps = DependentWatches(None, WorkQueue(global_limit=1, per_kind_limits={}), [watch], (), threading.Event())  # type: ignore[arg-type]
    informer = Informer(None, Resource(DEPLOYMENT, "deployments", True), deps._handle, keep=metadata_only)  # type: ignore[arg-type]
    deps._informers[DEPLOYMENT] = [informer]
    for deployment in deployments:
        informer._apply("ADDED", deployment)
    return {key: deps.children_digest(key, [str(DEPLOYMENT)]) for key in owners}


# -- making the copies ----------------------------------------------------------------------------------------


def clone(
    cluster: Cluster, namespace: str, watches: Path, templates: list[str], names: list[str], timeout: float
) -> Result:
    """Make ``names`` as copies of the converged Foos ``templates`` (round robin); returns how long each step
    took (the seconds, and objects per second)."""
    watch = next(w for w in load_watches(watches) if (w.gvk.group, w.gvk.kind) == (FOO.group, FOO.kind))
    gvk = str(watch.gvk)
    foos = {foo["metadata"]["name"]: foo for foo in cluster.list(FOO, namespace)}
    deployments = {d["metadata"]["name"]: d for d in deployments_of(cluster, namespace)}
    _check_digests(watch, [foos[name] for name in templates], deployments)
    steps: Result = {"templates": len(templates), "copies": len(names)}

    start = time.monotonic()
    made = _each(lambda name: cluster.create(FOO, namespace, foo_body(name)), names)
    steps["foos_seconds"] = _step("Foos created", start, len(names))
    copies = {foo["metadata"]["name"]: foo for foo in made}

    start = time.monotonic()
    sources = {name: foos[templates[i % len(templates)]] for i, name in enumerate(names)}
    bodies = [clone_deployment(deployments[sources[n]["spec"]["deploymentName"]], sources[n], copies[n]) for n in names]
    created = _each(lambda body: _create_deployment(cluster, namespace, body), bodies)
    steps["deployments_seconds"] = _step("Deployments created", start, len(names))

    start = time.monotonic()
    _wait_available(cluster, namespace, {d["metadata"]["name"] for d in created}, start + timeout)
    steps["available_seconds"] = _step("their replicas available", start, len(names))

    start = time.monotonic()
    keys = {name: Key(gvk, namespace, name) for name in names}
    digests = children_digests(watch, created, keys.values())
    statuses = [(n, clone_status(sources[n], copies[n], digests[keys[n]])) for n in names]
    _each(lambda item: _write_status(cluster, namespace, *item), statuses)
    steps["statuses_seconds"] = _step("statuses written", start, len(names))
    return steps


def _check_digests(watch: Watch, templates: list[Obj], deployments: dict[str, Obj]) -> None:
    """The digest computed here must be what the operator recorded on each converged Foo."""
    namespace = templates[0]["metadata"]["namespace"]
    keys = {foo["metadata"]["name"]: Key(str(watch.gvk), namespace, foo["metadata"]["name"]) for foo in templates}
    digests = children_digests(watch, deployments.values(), keys.values())
    for foo in templates:
        record = parse_record(foo.get("status"))
        if record is None or record.kinds != (str(DEPLOYMENT),):
            raise RuntimeError(f"{foo['metadata']['name']}: no record of a run with Deployments only: {record}")
        if digests[keys[foo["metadata"]["name"]]] != record.children:
            raise RuntimeError(f"{foo['metadata']['name']}: the children digest here is not the operator's")


def deployments_of(cluster: Cluster, namespace: str) -> list[Obj]:
    """Every Deployment of the namespace as JSON (thousands: without the client's models)."""
    resp = cluster.apps.list_namespaced_deployment(namespace, _preload_content=False)
    items: list[Obj] = json.loads(resp.data).get("items") or []
    for item in items:  # a list's items carry no apiVersion and kind; the informer's index needs them
        item.setdefault("apiVersion", "apps/v1")
        item.setdefault("kind", "Deployment")
    return items


def _create_deployment(cluster: Cluster, namespace: str, body: Obj) -> Obj:
    resp = cluster.apps.create_namespaced_deployment(namespace, body, _preload_content=False)
    created: Obj = json.loads(resp.data)
    return created


def _write_status(cluster: Cluster, namespace: str, name: str, status: Obj) -> None:
    cluster.custom.patch_namespaced_custom_object_status(
        FOO.group, FOO.version, namespace, FOO.plural, name, {"status": status}
    )


def _wait_available(cluster: Cluster, namespace: str, names: set[str], deadline: float) -> None:
    start, said = time.monotonic(), time.monotonic()
    while True:
        ready = sum(
            1
            for d in deployments_of(cluster, namespace)
            if d["metadata"]["name"] in names
            and (d.get("status") or {}).get("availableReplicas", 0) >= d["spec"].get("replicas", 1)
        )
        if ready == len(names):
            return
        now = time.monotonic()
        if now > deadline:
            raise RuntimeError(f"clone: only {ready} of {len(names)} Deployments available")
        if now - said >= 60:
            said = now
            say(f"clone: {ready} of {len(names)} Deployments available after {now - start:.0f} s")
        time.sleep(5)


def _step(what: str, start: float, count: int) -> float:
    seconds = time.monotonic() - start
    say(f"clone: {count} {what} in {seconds:.0f} s ({count / max(seconds, 1e-3):.0f}/s)")
    return seconds


def _each(call: Callable[[T], R], items: list[T], workers: int = WORKERS) -> list[R]:
    """``call`` on every item from a thread pool, in order, retrying throttling and 5xx."""

    def one(item: T) -> R:
        for attempt in range(10):
            try:
                return call(item)
            except ApiException as exc:
                if exc.status not in (429, 500, 503, 504) or attempt == 9:
                    raise
                time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, items))
