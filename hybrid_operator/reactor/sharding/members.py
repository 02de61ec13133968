"""The Leases of a sharding ring: this replica's own (create, renew with its ack, delete) and the others'.

Used by ``reactor.sharding``, which decides what they mean. Every member of a ring holds one Lease in the
ring's namespace, labelled ``hybrid-operator.dev/ring: <ring>``; its ``holderIdentity`` is the member id
and the annotation ``hybrid-operator.dev/drained-for`` carries the member's drain acknowledgement
(``shards.encode_ack``). Lists are plain GETs without a resourceVersion, so the API server answers them
from etcd with a quorum read: the drain handshake relies on that.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hybrid_operator.kube.client import ApiError, Kube
from hybrid_operator.kube.objects import meta_of, resource_version_of

log = logging.getLogger(__name__)

RING_LABEL = "hybrid-operator.dev/ring"
ACK_ANNOTATION = "hybrid-operator.dev/drained-for"
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
_MAX_DURATION = 3600


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _digest(text: str, size: int = 5) -> str:
    return hashlib.blake2b(text.encode(), digest_size=size).hexdigest()


def ring_label_value(ring: str) -> str:
    """The ring's label value: its name when that is a valid label value, else a digest of it."""
    return ring if _LABEL_VALUE.match(ring) else f"ring-{_digest(ring, 8)}"


def lease_name(ring: str, member: str) -> str:
    """A valid, stable Lease name for ``member`` of ``ring``: readable prefix plus a digest of both."""
    readable = re.sub(r"[^a-z0-9-]+", "-", f"{ring}-{member}".lower()).strip("-")[:200].strip("-")
    return f"{readable or 'member'}-{_digest(ring + chr(0) + member)}"


@dataclass(frozen=True)
class Record:
    """One member's Lease as read: its id, renew stamp, duration (bounded) and raw ack annotation."""

    lease: str
    member: str
    renewed: str
    duration: float
    ack: object  # the annotation as found: parsed (and distrusted) by ``shards.parse_ack``


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _record(item: Any, default_duration: float) -> Record | None:
    """A Lease from a list turned into a ``Record``; None for one with no usable holder."""
    if not isinstance(item, dict):
        return None
    meta = meta_of(item)
    spec = _mapping(item.get("spec"))
    holder = spec.get("holderIdentity")
    name = meta.get("name")
    if not isinstance(holder, str) or not holder or len(holder) > 253 or not isinstance(name, str):
        return None
    raw_duration = spec.get("leaseDurationSeconds")
    duration = default_duration
    if isinstance(raw_duration, int) and not isinstance(raw_duration, bool) and 0 < raw_duration <= _MAX_DURATION:
        duration = float(raw_duration)
    annotations = _mapping(meta.get("annotations"))
    renewed = spec.get("renewTime")
    return Record(
        lease=name,
        member=holder,
        renewed=renewed if isinstance(renewed, str) else "",
        duration=duration,
        ack=annotations.get(ACK_ANNOTATION),
    )


class MemberLeases:
    def __init__(self, kube: Kube, namespace: str, ring: str, member: str, lease_duration: float) -> None:
        self.kube = kube
        self.namespace = namespace
        self.ring = ring
        self.member = member
        self.lease_duration = lease_duration
        self.name = lease_name(ring, member)
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._path = f"{self._collection}/{self.name}"
        self._current: dict[str, Any] | None = None  # our Lease as last written

    def renew(self, ack: str | None) -> None:
        """Create or renew our Lease, publishing ``ack``; raises ``ApiError`` when it could not be written."""
        now = _micro_now()
        if self._current is None:
            try:
                self._current = self.kube.request("GET", self._path)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                self._current = self.kube.request("POST", self._collection, body=self._body(now, ack))
                return
        lease = self._body(now, ack)
        lease["metadata"]["resourceVersion"] = resource_version_of(self._current) or None
        try:
            self._current = self.kube.request("PUT", self._path, body=lease)
        except ApiError as exc:
            self._current = None  # read it again next time (a conflict, or someone deleted it)
            if exc.not_found:
                self._current = self.kube.request("POST", self._collection, body=self._body(now, ack))
                return
            raise

    def _body(self, now: str, ack: str | None) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {RING_LABEL: ring_label_value(self.ring)},
                "annotations": {ACK_ANNOTATION: ack} if ack is not None else {},
            },
            "spec": {
                "holderIdentity": self.member,
                "leaseDurationSeconds": max(1, round(self.lease_duration)),
                "renewTime": now,
            },
        }

    def list(self) -> list[Record]:
        """Every member Lease of the ring (ours included), read from etcd; raises ``ApiError``."""
        body = self.kube.request(
            "GET", self._collection, query={"labelSelector": f"{RING_LABEL}={ring_label_value(self.ring)}"}
        )
        items = body.get("items")
        if not isinstance(items, list):
            return []
        return [r for r in (_record(item, self.lease_duration) for item in items) if r is not None]

    def delete(self) -> None:
        """Remove our Lease (a clean shutdown): the others take our objects at once."""
        try:
            self.kube.request("DELETE", self._path)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("could not delete member lease %s/%s: %s", self.namespace, self.name, exc)
        self._current = None
