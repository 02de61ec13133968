"""Leader election with a coordination.k8s.io/v1 Lease: exactly one active replica.

Built by ``reactor.orchestration`` when ``--leader-elect`` is set, and run by the lifecycle as its ELECTION (a
``lifecycle.Runnable``): from ``start``, a thread of its own waits in ``acquire`` until this replica holds the
Lease (the replica watches nothing and runs nothing meanwhile), calls ``on_leading`` (the lifecycle starts
what only the leader runs), then renews it; if it cannot renew within the renew deadline it calls ``on_lost``
and the process exits, so it never works without the Lease. ``stop`` gives the Lease up, after the runs ended.
Timing is upstream's (15 s lease, 10 s renew deadline, 2 s retry). Like client-go, expiry is judged by when
*this* replica last saw the record change, not by the holder's clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hybrid_operator.kube.client import ApiError, Kube
from hybrid_operator.lifecycle import Loop

log = logging.getLogger(__name__)


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_leading: Callable[[], None] = lambda: None,
        on_lost: Callable[[], None] = lambda: None,
    ) -> None:
        self.kube = kube
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = (
            lease_duration,
            renew_deadline,
            retry_period,
        )
        self._observed: tuple[Any, Any] | None = None
        self._observed_at = 0.0
        self._last_contact = 0.0  # last time the Lease could be read or written
        self.leading = threading.Event()
        self.on_leading, self.on_lost = on_leading, on_lost
        self._loop = Loop("lease", self._lead)

    # -- the lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._loop.start()

    def stop(self, deadline: float) -> bool:
        """Stop trying or renewing, then give the Lease up (if still ours) so a stand-by takes over at once."""
        stopped = self._loop.stop(deadline)
        self.release()
        return stopped

    def ready(self) -> tuple[bool, str]:
        return self.can_lead()

    def _lead(self, stopping: threading.Event) -> None:
        if self.acquire(stopping):
            self.on_leading()
            self.keep(stopping, self.on_lost)

    def can_lead(self) -> tuple[bool, str]:
        """Readiness of a replica: the leader, or a stand-by that can reach its Lease to take over."""
        if self.leading.is_set():
            return True, "leading"
        if time.monotonic() - self._last_contact <= 3 * self.retry_period:
            return True, f"standing by; can take over lease {self.namespace}/{self.name}"
        return False, f"cannot reach lease {self.namespace}/{self.name}"

    def acquire(self, stop: threading.Event) -> bool:
        """Block until this replica holds the Lease (True) or ``stop`` is set (False)."""
        log.info("waiting to lead: lease %s/%s as %s", self.namespace, self.name, self.identity)
        while not stop.is_set():
            if self._try():
                self.leading.set()
                log.info("became the leader")
                return True
            stop.wait(self.retry_period)
        return False

    def keep(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """Renew until ``stop``; call ``on_lost`` if the Lease could not be renewed in time."""
        last_renew = time.monotonic()
        while not stop.wait(self.retry_period):
            if self._try():
                last_renew = time.monotonic()
            elif time.monotonic() - last_renew > self.renew_deadline:
                self.leading.clear()
                log.error("lost the lease %s/%s", self.namespace, self.name)
                on_lost()
                return

    def release(self) -> None:
        """Give the Lease up on a clean shutdown so a stand-by takes over at once."""
        if not self.leading.is_set():
            return
        try:
            lease = self.kube.request("GET", self.path)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = None
                lease["spec"]["leaseDurationSeconds"] = 1
                self.kube.request("PUT", self.path, body=lease)
        except ApiError as exc:
            log.warning("could not release the lease: %s", exc)
        self.leading.clear()

    def _try(self) -> bool:
        try:
            lease = self.kube.request("GET", self.path)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("cannot read lease: %s", exc)
                return False
            return self._create()
        self._last_contact = time.monotonic()
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and time.monotonic() - self._observed_at < duration:
            return False  # someone else holds it and has renewed recently
        now = _micro_now()
        if holder != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(holderIdentity=self.identity, renewTime=now, leaseDurationSeconds=int(self.lease_duration))
        lease["spec"] = spec
        try:
            self.kube.request("PUT", self.path, body=lease)
        except ApiError as exc:
            if not exc.conflict:
                log.warning("cannot update lease: %s", exc)
            return False
        self._observed, self._observed_at = (self.identity, now), time.monotonic()
        return True

    def _create(self) -> bool:
        now = _micro_now()
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        try:
            self.kube.request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", body=body)
        except ApiError as exc:
            if not exc.conflict:
                log.warning("cannot create lease: %s", exc)
            return False
        self._last_contact = time.monotonic()
        return True
