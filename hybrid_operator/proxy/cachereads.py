"""Which reads of a run the proxy may answer from the operator's informer caches, and the answers.

Called by ``server`` (with ``--proxy-cache-reads``) for every GET a run sends, before it is forwarded. The
informers are the ones the operator keeps anyway: ``reactor.orchestration`` registers the watched kinds'
(``Caches.add``), ``reactor.dependents`` those of the kinds runs created. Upstream's proxy answers reads of
such kinds from its cache too; ours does so only when the answer is provably the cache's to give:

- a GET of one object, or a LIST with no selector but its namespace, of a kind with an informer that has
  listed (synced), is healthy, keeps whole objects (a dependent kind's informer may keep only their
  metadata), has no label selector (a selector makes the cache partial) and covers the namespace; no
  other query parameter (``resourceVersion``, ``limit``, ``watch``...), a JSON ``Accept``;
- path segments that are plain Kubernetes names: anything odd (``..``, ``%2F``, a 300-character name, a
  subresource) is forwarded and the API server answers as it always did;
- read-your-own-writes: once a run wrote an object (POST, PUT, PATCH, DELETE through the proxy), that run's
  reads of it, and its LISTs of that kind and namespace, go to the API server for the rest of the run
  (``RunWrites``). The cache may not hold the write yet; the run that made it must never see it undone.

Everything else is forwarded, and so is a read that would meet what the informer kept of an object over
``--max-object-entries`` (a stub, not the object). A found object is answered exactly as the cache holds
it (what the watch delivered, apiVersion and kind set, without ``metadata.managedFields``, which the
informers never keep), a missing one with the API server's NotFound Status.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from urllib.parse import parse_qsl

from hybrid_operator.kube import storing
from hybrid_operator.kube.objects import OVERSIZE_KEY, name_of
from hybrid_operator.kube.watching import Informer

_GROUP = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_VERSION = re.compile(r"v[0-9]{1,3}([a-z]{1,8}[0-9]{0,3})?")
_PLURAL = re.compile(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9._:]{0,251}[A-Za-z0-9])?")
_EMPTY_ALLOWED = {"labelSelector", "fieldSelector"}  # clients send them empty; with a value: forward
_MAX_WRITES = 1024  # objects one run may write before all its reads are forwarded
ANY = "*"  # a name standing for every object of a collection
# In the JSON of what an informer kept of an object over the entry bound (a stub, not the object). Found
# anywhere else (a key in a spec), the read is forwarded all the same: the API server's answer is never wrong.
_STUB_MARK = json.dumps(OVERSIZE_KEY).encode() + b":"


@dataclass(frozen=True)
class Location:
    """Where a request path points: a kind's collection (``key``, e.g. ``/apis/apps/v1/deployments``), a
    namespace ("" for cluster-scoped or all namespaces), a name ("" for the collection) and a subresource."""

    key: str
    namespace: str
    name: str
    sub: str = ""


def locate(path: str) -> Location | None:
    """The resource a path names, or None for anything that is not plainly one (never raises)."""
    if len(path) > 2048:
        return None
    parts = path.split("/")
    if parts[:3] == ["", "api", "v1"]:
        prefix, rest = "/api/v1", parts[3:]
    elif len(parts) > 4 and parts[1] == "apis" and _GROUP.fullmatch(parts[2]) and _VERSION.fullmatch(parts[3]):
        prefix, rest = f"/apis/{parts[2]}/{parts[3]}", parts[4:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
        if not _NAMESPACE.fullmatch(namespace):
            return None
    if not 1 <= len(rest) <= 3 or "" in rest or not _PLURAL.fullmatch(rest[0]):
        return None
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if (name and not _NAME.fullmatch(name)) or (sub and not _PLURAL.fullmatch(sub)):
        return None
    return Location(f"{prefix}/{rest[0]}", namespace, name, sub)


def cacheable(target: str, accept: str | None) -> Location | None:
    """A GET's target the cache may answer (one object or a whole collection), or None to forward it."""
    path, _, query = target.partition("?")
    location = locate(path)
    if location is None or location.sub:
        return None
    try:
        params = parse_qsl(query, keep_blank_values=True, max_num_fields=8)
    except ValueError:
        return None
    if any(key not in _EMPTY_ALLOWED or value for key, value in params):
        return None
    if accept and "application/json" not in accept and "*/*" not in accept:
        return None
    if accept and ("as=" in accept or "protobuf" in accept):
        return None  # a Table or a protobuf answer: the API server's to render
    return location


class RunWrites:
    """What one run wrote through the proxy: its reads of those objects go to the API server."""

    def __init__(self, limit: int = _MAX_WRITES) -> None:
        self._written: set[tuple[str, str, str]] = set()  # (key, namespace, name or ANY)
        self._everything = False
        self._limit = limit
        self._lock = threading.Lock()

    def note(self, path: str, created_name: str | None = None) -> None:
        """A write to ``path``; for a create (POST to a collection), ``created_name`` if the body named it."""
        location = locate(path)
        with self._lock:
            if location is None or len(self._written) >= self._limit:
                self._everything = True  # unsure what it touched: forward every read of this run
                return
            self._written.add((location.key, location.namespace, location.name or created_name or ANY))
            if location.key in ("/api/v1/status", "/api/v1/finalize"):  # /api/v1/namespaces/{name}/status
                self._written.add(("/api/v1/namespaces", "", location.namespace))

    def touched(self, location: Location) -> bool:
        """Whether this run wrote what ``location`` reads (for a collection: anything in it)."""
        with self._lock:
            if self._everything:
                return True
            if location.name:
                return any(
                    entry in self._written
                    for entry in (
                        (location.key, location.namespace, location.name),
                        (location.key, location.namespace, ANY),
                        (location.key, "", ANY),
                    )
                )
            return any(
                key == location.key and (not location.namespace or namespace in ("", location.namespace))
                for key, namespace, _ in self._written
            )


def created_name(body: bytes | None) -> str | None:
    """The name a create's JSON body gives its object (None: none, generateName, or not JSON)."""
    try:
        obj = json.loads(body) if body else None
    except (ValueError, RecursionError):
        return None
    return (name_of(obj) or None) if isinstance(obj, dict) else None


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


class Caches:
    """The informers whose stores the proxy may read, by collection key."""

    def __init__(self) -> None:
        self._by_key: dict[str, list[Informer]] = {}
        self._lock = threading.Lock()

    def add(self, informer: Informer) -> None:
        with self._lock:
            self._by_key.setdefault(informer.resource.path(), []).append(informer)

    def _covering(self, location: Location) -> Informer | None:
        with self._lock:
            candidates = list(self._by_key.get(location.key, ()))
        for informer in candidates:
            if not informer.full or informer.label_selector or not informer.synced.is_set():
                continue
            if not informer.health()[0]:
                continue
            if not informer.resource.namespaced:
                if not location.namespace:
                    return informer
                continue
            # A namespaced object needs its namespace; a collection across namespaces an informer of all.
            if (location.namespace or not location.name) and informer.namespace in ("", location.namespace):
                return informer
        return None

    def answer(self, location: Location) -> Answer | None:
        """The cache's answer to a GET of ``location``, or None when no informer covers it."""
        informer = self._covering(location)
        if informer is None:
            return None
        if location.name:
            stored = informer.raw(location.namespace, location.name)
            if stored is None:
                return Answer(404, json.dumps(_not_found(informer, location.name)).encode())
            body = storing.as_json(stored)
            return None if body is None or _STUB_MARK in body else Answer(200, body)
        everything, resource_version = informer.raw_snapshot()
        items = sorted(
            (key, storing.as_json(value))
            for key, value in everything
            if not location.namespace or key[0] == location.namespace
        )
        if any(body is None or _STUB_MARK in body for _key, body in items):
            return None  # an object too deep to encode, or only a stub is kept of it: the API server's to answer
        gvk = informer.resource.gvk
        head = {
            "apiVersion": gvk.api_version,
            "kind": f"{gvk.kind}List",
            "metadata": {"resourceVersion": resource_version},
        }
        # The items as stored, spliced into the list without a decode and an encode of each.
        prefix = json.dumps(head)[:-1].encode() + b', "items": ['
        return Answer(200, prefix + b",".join(body for _key, body in items if body is not None) + b"]}")


def _not_found(informer: Informer, name: str) -> dict[str, object]:
    """The Status the API server answers a GET of a missing object with."""
    resource = informer.resource
    qualified = f"{resource.plural}.{resource.gvk.group}" if resource.gvk.group else resource.plural
    details: dict[str, str] = {"name": name, "kind": resource.plural}
    if resource.gvk.group:
        details["group"] = resource.gvk.group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{qualified} "{name}" not found',
        "reason": "NotFound",
        "details": details,
        "code": 404,
    }
