"""The API server side of the benchmarks: CRDs, namespaces, objects, and watching objects converge.

Everything the bench creates lives in namespaces labelled with the run's id (``RUN_LABEL``), so a run
that was interrupted can be cleaned up later (``--cleanup``); CRDs are installed or updated and kept.
``Tracker`` follows one kind in one namespace with a watch and notes the moment each object first meets
a condition (``Successful=True``, replicas available): latencies are measured from the bench's own
clock, at the moment the API server tells it, never by polling.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from bench import procs

RUN_LABEL = "bench.hybrid-operator.dev/run"
FAKE_NODE = "kwok.x-k8s.io/node"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


TRIVIAL = Kind("bench.hybrid-operator.dev", "v1alpha1", "trivials", "Trivial")
FOO = Kind("samplecontroller.k8s.io", "v1alpha1", "foos", "Foo")


def condition_true(obj: Obj, ctype: str) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond.get("status") == "True"
    return False


def successful(obj: Obj) -> bool:
    return condition_true(obj, "Successful")


def failure(obj: Obj) -> str | None:
    """The message of a ``Failure=True`` condition (a failed run), unless the object is also Successful."""
    if successful(obj):
        return None
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Failure" and cond.get("status") == "True":
            return str(cond.get("message") or cond.get("reason") or "Failure=True")
    return None


def foo_available(obj: Obj) -> bool:
    """The Foo reports as many available replicas as it asks for."""
    want = (obj.get("spec") or {}).get("replicas", 1)
    have = (obj.get("status") or {}).get("availableReplicas")
    try:
        return have is not None and int(have) == int(want)
    except (TypeError, ValueError):
        return False


def bed_run_dir(kubeconfig: str) -> Path:
    """Where ``hack/local-cluster.sh`` keeps the pid files of a bed's processes: ``<state>/run``, beside the
    kubeconfig it prints (absent for a cluster that is not such a bed)."""
    return Path(kubeconfig).resolve().parent / "run"


class Cluster:
    """A thin, thread-safe handle on the API server the contenders run against."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
        cfg.connection_pool_maxsize = 32  # creating thousands of objects from a thread pool
        # Typed as Any: objects stay plain dicts here, and the client's generated models add nothing.
        self.api: Any = client.ApiClient(cfg)
        self.custom: Any = client.CustomObjectsApi(self.api)
        self.core: Any = client.CoreV1Api(self.api)
        self.apps: Any = client.AppsV1Api(self.api)
        self.ext: Any = client.ApiextensionsV1Api(self.api)

    # ------------------------------------------------------------------------------------- cluster

    def bed_cpu_seconds(self) -> float | None:
        """CPU the local test bed's processes (etcd, kube-apiserver, the controller manager, the scheduler,
        kwok) have used so far, read from their pid files beside the kubeconfig (``hack/local-cluster.sh``
        keeps them in ``<state>/run``); None for a cluster that is not such a bed."""
        run = bed_run_dir(self.kubeconfig)
        pids = sorted(run.glob("*.pid")) if run.is_dir() else []
        total = 0.0
        for pid_file in pids:
            try:
                found = procs.read(int(pid_file.read_text().strip()))
            except (OSError, ValueError):
                found = None
            if found is not None:
                total += found.cpu_ticks / procs.TICKS
        return total if pids else None

    def server_version(self) -> str:
        info = client.VersionApi(self.api).get_code()
        return str(info.git_version)

    def apiserver_metrics(self) -> str:
        """The API server's own /metrics (the admin kubeconfig may read it)."""
        api = self.api
        if hasattr(api, "param_serialize"):  # kubernetes >= 35: the newer generator's two-step call
            request = api.param_serialize(
                "GET", "/metrics", header_params={"Accept": "text/plain"}, auth_settings=["BearerToken"]
            )
            resp = api.call_api(*request)
            resp.read()
        else:
            resp = api.call_api(
                "/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True
            )
        return str(resp.data.decode(errors="replace"))

    def ensure_crds(self, paths: Iterable[Path], timeout: float = 60) -> None:
        """Create or update the CRDs in ``paths`` and wait until the API server serves them."""
        names = []
        for path in paths:
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                name = doc["metadata"]["name"]
                names.append(name)
                try:
                    self.ext.create_custom_resource_definition(doc)
                except ApiException as exc:
                    if exc.status != 409:
                        raise
                    current = self.ext.read_custom_resource_definition(name)
                    doc["metadata"]["resourceVersion"] = current.metadata.resource_version
                    self.ext.replace_custom_resource_definition(name, doc)
        deadline = time.monotonic() + timeout
        for name in names:
            while not self._established(name):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CRD {name} not established after {timeout}s")
                time.sleep(0.2)

    def _established(self, name: str) -> bool:
        crd = self.ext.read_custom_resource_definition(name)
        return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])

    # ---------------------------------------------------------------------------------- namespaces

    def create_namespace(self, name: str, run_id: str) -> None:
        self.core.create_namespace({"metadata": {"name": name, "labels": {RUN_LABEL: run_id}}})

    def bench_namespaces(self) -> list[str]:
        """Every namespace any bench run created and has not deleted yet."""
        items = self.core.list_namespace(label_selector=RUN_LABEL).items
        return [ns.metadata.name for ns in items]

    def delete_namespaces(self, names: Iterable[str], timeout: float) -> list[str]:
        """Delete and wait until they are gone; returns those still there after ``timeout``."""
        pending = []
        for name in names:
            try:
                self.core.delete_namespace(name, propagation_policy="Background")
                pending.append(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            time.sleep(1)
            pending = [name for name in pending if self._exists(name)]
        return pending

    def _exists(self, namespace: str) -> bool:
        try:
            self.core.read_namespace(namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # ------------------------------------------------------------------------------------- objects

    def create(self, kind: Kind, namespace: str, body: Obj) -> Obj:
        result: Obj = self.custom.create_namespaced_custom_object(
            kind.group, kind.version, namespace, kind.plural, body
        )
        return result

    def create_many(self, kind: Kind, namespace: str, bodies: list[Obj], workers: int = 8) -> None:
        """Create all of them as fast as the API server takes them (retrying throttling and 5xx)."""

        def one(body: Obj) -> None:
            for attempt in range(10):
                try:
                    self.create(kind, namespace, body)
                    return
                except ApiException as exc:
                    if exc.status == 409:
                        return
                    if exc.status not in (429, 500, 503, 504) or attempt == 9:
                        raise
                    time.sleep(0.2 * (attempt + 1))

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for _ in pool.map(one, bodies):
                pass

    def get(self, kind: Kind, namespace: str, name: str) -> Obj:
        found: Obj = self.custom.get_namespaced_custom_object(kind.group, kind.version, namespace, kind.plural, name)
        return found

    def patch(self, kind: Kind, namespace: str, name: str, merge: Obj) -> None:
        """A JSON merge patch (the client sends a dict body as one)."""
        self.custom.patch_namespaced_custom_object(kind.group, kind.version, namespace, kind.plural, name, merge)

    def delete(self, kind: Kind, namespace: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(kind.group, kind.version, namespace, kind.plural, name)

    def list(self, kind: Kind, namespace: str) -> list[Obj]:
        listing = self.custom.list_namespaced_custom_object(kind.group, kind.version, namespace, kind.plural)
        return list(listing.get("items") or [])

    def pods_stuck_unready(self, namespace: str) -> int:
        """Pods whose containers are ready but whose Ready condition is False.

        On a fake (kwok) node that is what is left after the node missed its heartbeats: the node
        lifecycle controller sets every pod's Ready to False, and nothing sets it back.
        """
        stuck = 0
        for pod in self.core.list_namespaced_pod(namespace).items:
            conditions = {c.type: c.status for c in (pod.status.conditions or [])}
            if conditions.get("ContainersReady") == "True" and conditions.get("Ready") == "False":
                stuck += 1
        return stuck

    def ensure_pod_room(self, pods: int, per_node: int) -> None:
        """Enough fake (kwok) nodes for ``pods`` more pods, ``per_node`` a node: the bed starts with one of
        10,000; the bench adds ``kwok-node-N`` copies of it (kwok runs every node annotated as fake)."""
        nodes = [n for n in self.core.list_node().items if (n.metadata.annotations or {}).get(FAKE_NODE) == "fake"]
        if not nodes:
            return
        template = nodes[0]
        for index in range(len(nodes), -(-pods // per_node)):
            name = f"kwok-node-{index}"
            self.core.create_node(
                {
                    "metadata": {
                        "name": name,
                        "annotations": {FAKE_NODE: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                        "labels": {**(template.metadata.labels or {}), "kubernetes.io/hostname": name},
                    },
                    "status": {
                        "allocatable": dict(template.status.allocatable or {}),
                        "capacity": dict(template.status.capacity or {}),
                    },
                }
            )

    def deployment_replicas(self, namespace: str) -> dict[str, int]:
        """Name -> spec.replicas of every Deployment in the namespace."""
        items = self.apps.list_namespaced_deployment(namespace).items
        return {d.metadata.name: int(d.spec.replicas or 0) for d in items}


class Tracker:
    """Watches one kind in one namespace; notes when each object is first seen meeting ``predicate``.

    Times are ``time.monotonic()`` at the moment the event arrived. Objects showing ``Failure=True``
    before meeting the predicate are noted in ``failed`` with the message, so waits end early. A watch
    that ends is resumed from the last resourceVersion; one that expired (410) starts again from a list.
    """

    def __init__(self, cluster: Cluster, kind: Kind, namespace: str, predicate: Callable[[Obj], bool]) -> None:
        self.cluster = cluster
        self.kind = kind
        self.namespace = namespace
        self.predicate = predicate
        self.first: dict[str, float] = {}
        self.failed: dict[str, str] = {}
        self.gone: dict[str, float] = {}  # when a DELETED event for it arrived
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"tracker-{kind.plural}", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._synced.wait(60):
            raise TimeoutError(f"could not list {self.kind.plural} in {self.namespace}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def snapshot(self) -> dict[str, float]:
        """A copy of ``first`` that the watch thread cannot change under the caller."""
        with self._cond:
            return dict(self.first)

    def wait_for(self, name: str, timeout: float) -> float | None:
        """When ``name`` first met the predicate; None after ``timeout`` or once it shows a failure."""
        with self._cond:
            self._cond.wait_for(lambda: name in self.first or name in self.failed, timeout)
            return self.first.get(name)

    def wait_gone(self, name: str, timeout: float) -> float | None:
        """When ``name`` was deleted (its DELETED event); None after ``timeout``."""
        with self._cond:
            self._cond.wait_for(lambda: name in self.gone, timeout)
            return self.gone.get(name)

    def _see(self, obj: Obj) -> None:
        name = str(obj["metadata"]["name"])
        if name in self.first:
            return
        if self.predicate(obj):
            with self._cond:
                self.first[name] = time.monotonic()
                self._cond.notify_all()
        elif (message := failure(obj)) is not None:
            with self._cond:
                self.failed.setdefault(name, message)
                self._cond.notify_all()

    def _loop(self) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                version = self._watch(version or self._list())
            except ApiException as exc:
                if exc.status == 410:
                    version = None
                else:
                    self._stop.wait(0.5)
            except Exception:  # connection reset, timeout: watch again
                self._stop.wait(0.5)

    def _list(self) -> str:
        k = self.kind
        listing = self.cluster.custom.list_namespaced_custom_object(k.group, k.version, self.namespace, k.plural)
        for obj in listing.get("items") or []:
            self._see(obj)
        self._synced.set()
        return str(listing["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str | None:
        """Follow events from ``version``; returns where to resume, or None to list again."""
        k = self.kind
        stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
            self.cluster.custom.list_namespaced_custom_object,
            k.group,
            k.version,
            self.namespace,
            k.plural,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=5,  # short, so that stop() is noticed soon
        )
        for event in stream:
            obj = event["object"]
            if event["type"] == "ERROR":
                return None
            version = str(obj["metadata"]["resourceVersion"])
            if event["type"] in ("ADDED", "MODIFIED"):
                self._see(obj)
            elif event["type"] == "DELETED":
                with self._cond:
                    self.gone[str(obj["metadata"]["name"])] = time.monotonic()
                    self._cond.notify_all()
            if self._stop.is_set():
                break
        return version
