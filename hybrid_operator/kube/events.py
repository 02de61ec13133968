"""Kubernetes Events on the objects the operator reconciles: what a person sees in `kubectl describe`.

Called by ``reactor.reconciling`` for failed runs, recoveries and the Events roles ask for. Like
client-go's recorder, a repeated Event (same object, type, reason and message) increments the count of
one Event object instead of creating a new one each time. Failures to record are logged, never raised:
an Event is a courtesy, not part of the reconcile.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from datetime import UTC, datetime

from hybrid_operator.kube.client import ApiError, Kube, KubeObject
from hybrid_operator.kube.objects import name_of, namespace_of, resource_version_of, uid_of

log = logging.getLogger(__name__)
COMPONENT = "hybrid-operator"
MAX_TRACKED = 4096  # repeated Events whose count this process remembers


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        # Event name -> the count last written; least recently used dropped past MAX_TRACKED (as client-go's
        # LRU): an Event forgotten here is looked up again on the conflict of its next create.
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def _remember(self, name: str, count: int) -> None:
        """Under the lock."""
        self._counts[name] = count
        self._counts.move_to_end(name)
        while len(self._counts) > MAX_TRACKED:
            self._counts.popitem(last=False)

    def record(self, obj: KubeObject, event_type: str, reason: str, message: str) -> None:
        involved = name_of(obj)
        namespace = namespace_of(obj) or "default"  # a cluster-scoped object's Events live in "default"
        digest = hashlib.sha256(f"{uid_of(obj)}|{event_type}|{reason}|{message}".encode()).hexdigest()[:16]
        name = f"{involved}.{digest}"
        path = f"/api/v1/namespaces/{namespace}/events"
        stamp = _now()
        message = message if len(message) <= 1024 else message[:1021] + "..."
        try:
            with self._lock:
                count = self._counts.get(name, 0) + 1
                self._remember(name, count)
            if count > 1:
                try:
                    self.kube.request(
                        "PATCH",
                        f"{path}/{name}",
                        body={"count": count, "lastTimestamp": stamp},
                        content_type="application/merge-patch+json",
                    )
                    return
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion"),
                    "kind": obj.get("kind"),
                    "name": involved,
                    "namespace": namespace_of(obj) or None,  # null for a cluster-scoped object
                    "uid": uid_of(obj),
                    "resourceVersion": resource_version_of(obj),
                },
                "type": event_type,
                "reason": reason,
                "message": message,
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
            }
            try:
                self.kube.request("POST", path, body=body)
                with self._lock:  # a new Event (the old one expired, or never was): it counts from 1 again
                    self._remember(name, 1)
            except ApiError as exc:
                if not exc.conflict:
                    raise
                current = self.kube.request("GET", f"{path}/{name}")
                count = int(current.get("count") or 1) + 1
                with self._lock:
                    self._remember(name, count)
                self.kube.request(
                    "PATCH",
                    f"{path}/{name}",
                    body={"count": count, "lastTimestamp": stamp},
                    content_type="application/merge-patch+json",
                )
        except ApiError as exc:
            log.warning("could not record event %s on %s/%s: %s", reason, namespace, involved, exc)
