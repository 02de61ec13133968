"""Fakes of the operator's collaborators for unit tests: a clock, an API server, an executor, a run proxy.

One of each, shared by every test that needs it, and each as faithful as its tests need the real thing to
be: ``FakeKube`` checks a patch's resourceVersion as the API server does; ``FakeExecutor`` hands back
scripted results and records what each run was given. Nothing here opens a socket or starts a process.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hybrid_operator.ansible.results import RunResult
from hybrid_operator.ansible.running import RunRequest
from hybrid_operator.kube.client import ApiError, KubeObject, Resource
from hybrid_operator.kube.objects import GVK
from hybrid_operator.kube.owners import Owner
from hybrid_operator.kube.patching import merge_patch
from hybrid_operator.proxy.confining import ANYWHERE, Reach


class FakeClock:
    """A monotonic clock that moves only when told (``advance`` or setting ``now``); ``called`` is set
    once anything has read it."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.called = threading.Event()

    def __call__(self) -> float:
        self.called.set()
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeKube:
    """An API server serving one resource, in memory.

    Objects live in ``objects`` by (namespace, name); ``merge_patch`` checks a patch's resourceVersion
    against the stored one and answers 409 on a mismatch, as the real one does, and the status subresource
    takes only ``status``. Discovery answers from ``discovery`` in order (the last one again and again), or
    with the served resource; lists from ``lists`` by path; a watch yields ``watches[path]`` once, then stays
    quiet until ``stop`` is set.
    """

    def __init__(
        self,
        served: Resource,
        *,
        discovery: Sequence[Resource | ApiError] = (),
        stop: threading.Event | None = None,
    ) -> None:
        self.served = served
        self.discovery = list(discovery)
        self.stop = stop
        self.objects: dict[tuple[str | None, str], KubeObject] = {}
        self.version = 100
        self.patches: list[tuple[str | None, Any]] = []  # (sub, body) of every accepted patch
        self.fail_next_patch: list[ApiError] = []  # raised, in order, by the next patches
        self.on_get: Callable[[], None] | None = None
        self.lists: dict[str, Any] = {}  # path -> the page it lists, or an error
        self.watches: dict[str, list[dict[str, Any]]] = {}  # path -> the events of its first watch
        self.listed: list[str] = []

    # -- discovery, lists and watches ---------------------------------------------------------------------

    def resource(self, gvk: GVK) -> Resource:
        assert gvk == self.served.gvk
        if not self.discovery:
            return self.served
        answer = self.discovery.pop(0) if len(self.discovery) > 1 else self.discovery[0]
        if isinstance(answer, ApiError):
            raise answer
        return answer

    def request(
        self, method: str, path: str, *, query: Any = None, timeout: Any = None, max_bytes: Any = None
    ) -> KubeObject:
        self.listed.append(path)
        answer = self.lists.get(path, {"metadata": {"resourceVersion": "1"}, "items": []})
        if isinstance(answer, ApiError):
            raise answer
        return {"metadata": dict(answer["metadata"]), "items": [dict(i) for i in answer["items"]]}

    def stream(self, path: str, query: Any, timeout: Any) -> Iterator[dict[str, Any]]:
        yield from self.watches.pop(path, [])
        while self.stop is not None and not self.stop.is_set():  # a quiet watch, until the operator stops
            time.sleep(0.002)

    # -- objects ------------------------------------------------------------------------------------------

    def put(self, obj: KubeObject) -> KubeObject:
        meta = obj["metadata"]
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        self.objects[(meta.get("namespace"), meta["name"])] = obj
        return copy.deepcopy(obj)

    def delete(self, namespace: str, name: str) -> None:
        self.objects.pop((namespace, name), None)

    def stored(self, namespace: str = "ns", name: str = "mc") -> KubeObject:
        return copy.deepcopy(self.objects[(namespace, name)])

    def get(self, res: Resource, namespace: str | None, name: str) -> KubeObject:
        assert res == self.served
        if self.on_get is not None:
            self.on_get()
        try:
            return copy.deepcopy(self.objects[(namespace, name)])
        except KeyError:
            raise ApiError(404, "Not Found") from None

    def get_or_none(self, res: Resource, namespace: str | None, name: str) -> KubeObject | None:
        """``Kube.get_or_none``: NotFound is None, anything else is raised."""
        try:
            return self.get(res, namespace, name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def merge_patch(
        self, res: Resource, namespace: str | None, name: str, patch: Any, sub: str | None = None
    ) -> KubeObject:
        assert res == self.served
        if self.fail_next_patch:
            raise self.fail_next_patch.pop(0)
        current = self.objects.get((namespace, name))
        if current is None:
            raise ApiError(404, "Not Found")
        patch = copy.deepcopy(patch)
        expected = patch.get("metadata", {}).pop("resourceVersion", None)
        if expected is not None and expected != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict")
        if sub == "status":
            patch = {"status": patch["status"]}  # the status subresource ignores everything else
        self.patches.append((sub, patch))
        return self.put(merge_patch(current, patch))


class FakeExecutor:
    """Returns scripted ``results`` (then plain successes) and records each run: the request, what
    ``kube`` held of its object when it started (``seen``), the kubeconfig it was given. ``during`` runs
    inside the run, to change the world meanwhile; ``error`` is raised instead of a result. With
    ``hands_on``, the result goes to the request's ``on_result`` before ``run`` returns (as the warm
    executor does, before it writes the run's artifacts), and ``after_hand_on`` records what ``kube``
    held of the object right after (None: not handed on)."""

    def __init__(self, kube: FakeKube | None = None, *results: RunResult) -> None:
        self.kube = kube
        self.results = list(results)
        self.requests: list[RunRequest] = []
        self.seen: list[KubeObject] = []  # what the API server held when each run started
        self.kubeconfigs: list[str] = []  # the kubeconfig text each run was given, if any
        self.during: Callable[[], None] | None = None
        self.error: Exception | None = None
        self.extra_ansible_args: str | None = None  # what the executor was built with, if a test records it
        self.watches: list[Any] = []  # the watches it was built for, if a test records them
        self.hands_on = False
        self.after_hand_on: list[KubeObject | None] = []
        self.started = self.closed = False

    def run(self, request: RunRequest) -> RunResult:
        self.requests.append(request)
        if self.kube is not None and (request.namespace, request.name) in self.kube.objects:
            self.seen.append(self.kube.stored(request.namespace, request.name))
        if "KUBECONFIG" in request.env:
            self.kubeconfigs.append(Path(request.env["KUBECONFIG"]).read_text())
        if self.during is not None:
            self.during()
        if self.error is not None:
            raise self.error
        result = self.results.pop(0) if self.results else RunResult(run_id=request.run_id, ok=1)
        if self.hands_on and request.on_result is not None:
            request.on_result(result)
            kube, where = self.kube, (request.namespace, request.name)
            self.after_hand_on.append(kube.stored(*where) if kube is not None and where in kube.objects else None)
        return result

    def start(self) -> None:
        self.started = True

    def stop(self, deadline: float) -> bool:
        self.close()
        return True

    def ready(self) -> tuple[bool, str]:
        return True, "ok"

    def close(self) -> None:
        self.closed = True


class FakeProxy:
    """The runs' API proxy: records the kubeconfigs it grants and revokes, and whether it was started and
    stopped; built with the same arguments as the real one."""

    def __init__(
        self,
        kube: Any = None,
        *,
        inject: bool = True,
        on_child: Any = None,
        caches: Any = None,
        max_stream_seconds: float = 0,
    ) -> None:
        self.kube, self.inject, self.on_child, self.caches = kube, inject, on_child, caches
        self.max_stream_seconds = max_stream_seconds
        self.started = self.stopped = False
        self.granted: dict[str, Owner] = {}
        self.reach: dict[str, Reach] = {}
        self.revoked: list[str] = []

    def start(self) -> None:
        self.started = True

    def stop(self, deadline: float | None = None) -> bool:
        self.stopped = True
        return True

    def ready(self) -> tuple[bool, str]:
        return True, "ok"

    def kubeconfig_for(self, owner: Owner, run_id: str, reach: Reach = ANYWHERE) -> str:
        self.granted[run_id] = owner
        self.reach[run_id] = reach
        return f"token-for-{run_id}"

    def revoke(self, run_id: str) -> None:
        self.revoked.append(run_id)
