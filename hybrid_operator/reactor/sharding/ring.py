"""The ring this replica keeps with ``--sharding``: its Lease, the live members, and the gate for every run.

Built by ``orchestration``, started and stopped by the lifecycle with what every replica keeps going (a
``lifecycle.Runnable``). One thread (``run``) renews this member's Lease every retry period, publishing its
drain ack (``shards``), then lists the ring's Leases and works out who is alive. Like client-go's leader
election, a peer's expiry is judged by when *this* replica last saw its renew stamp change, never by the
peer's clock. When the live set (the view) changes, ``on_view`` tells the orchestration which objects to
enqueue, and the next renew publishes the new ack as soon as no run in progress is of an object this member no
longer owns.

The workers ask ``begin`` before each run and call ``end`` after it: ``begin`` says RUN (recorded as in
flight), WAIT (ours, a peer has not drained yet: parked, handed back by ``take_parked`` after the next
read) or DROP (not ours). Should this member fail to renew for the renew deadline, which is shorter than
the lease, ``on_lost`` is called: the process must stop running at once, before the peers take over.
``stop`` comes after the workers': it ends the thread, and deletes our Lease when no run of ours is left,
so the others take our objects at once.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from hybrid_operator import metrics
from hybrid_operator.kube.client import ApiError
from hybrid_operator.lifecycle import Loop
from hybrid_operator.reactor.queueing import Key
from hybrid_operator.reactor.sharding import rules as shards
from hybrid_operator.reactor.sharding.members import MemberLeases, Record
from hybrid_operator.reactor.sharding.rules import Members, Peer, Verdict

log = logging.getLogger(__name__)

ViewChange = Callable[[Members, Members], None]  # (old view, new view)


class Ring:
    def __init__(
        self,
        leases: MemberLeases,
        lease_duration: float,
        on_view: ViewChange,
        on_lost: Callable[[], None],
        after_tick: Callable[[], None] = lambda: None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.leases = leases
        self.me = leases.member
        log.info("sharding as %s in ring %s/%s", self.me, leases.namespace, leases.ring)
        self.lease_duration = lease_duration
        self.renew_deadline = lease_duration * 2 / 3  # upstream's 10 s of 15
        self.retry_period = lease_duration * 2 / 15  # upstream's 2 s of 15
        self.on_view = on_view
        self.on_lost = on_lost
        self.after_tick = after_tick
        self._clock = clock
        self._lock = threading.Lock()
        self._view: Members = frozenset()
        self._ack: Members | None = None  # what our Lease says now
        # The peers' acks may decide a start only if they were read after our current ack was written:
        # writes counts our ack changes, read_after how many had been written when the last read began.
        self._writes = 0
        self._read_after = -1
        self._peers: dict[str, Peer] = {}
        self._observed: dict[str, tuple[str, float]] = {}  # lease -> (renew stamp, when we saw it change)
        self._in_flight: dict[Key, str] = {}  # key -> uid of the object being run
        self._parked: set[Key] = set()
        self._last_renew = clock()
        self._wake = threading.Event()
        self._gone = False  # our Lease vanished from the ring after we had joined
        self.joined = threading.Event()  # our Lease is in the ring and our ack covers our view
        self._loop = Loop("ring", self.run)

    # -- the workers' side -----------------------------------------------------------------------------

    def owns(self, uid: str) -> bool:
        """Whether the current view gives us ``uid`` (for enqueueing; ``begin`` decides about running)."""
        with self._lock:
            return shards.owner(uid, self._view) == self.me

    def view(self) -> Members:
        with self._lock:
            return self._view

    def begin(self, key: Key, uid: str) -> Verdict:
        with self._lock:
            if self._read_after != self._writes:  # peers not read since our ack changed
                verdict = Verdict.WAIT if shards.owner(uid, self._view) == self.me else Verdict.DROP
            else:
                verdict = shards.decide(uid, self.me, self._view, self._ack, self._peers)
            if verdict is Verdict.RUN:
                self._in_flight[key] = uid
            elif verdict is Verdict.WAIT:
                self._parked.add(key)
            return verdict

    def end(self, key: Key) -> None:
        with self._lock:
            uid = self._in_flight.pop(key, None)
            moved = uid is not None and shards.owner(uid, self._view) != self.me
        if moved:
            self._wake.set()  # we may have drained for a new view: publish it now, not at the next period

    def take_parked(self) -> set[Key]:
        with self._lock:
            parked, self._parked = self._parked, set()
            return parked

    def status(self) -> tuple[bool, str]:
        """Readiness: joined the ring (our Lease is live and our ack covers our view)."""
        with self._lock:
            view, ack = self._view, self._ack
        if self.joined.is_set():
            return True, f"member {self.me} of a ring of {len(view)}"
        return False, f"joining the ring as {self.me} (view {sorted(view)}, ack {sorted(ack or ())})"

    # -- the lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._loop.start()

    def stop(self, deadline: float) -> bool:
        """Stop renewing; leave the ring if no run of ours is in flight (the runs were abandoned otherwise)."""
        self._loop.stopping.set()
        self._wake.set()
        stopped = self._loop.join(deadline)
        with self._lock:
            drained = not self._in_flight
        if drained:
            self.leave()
        return stopped

    def ready(self) -> tuple[bool, str]:
        return self.status()

    # -- the ring thread -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Renew and read until ``stop``; a change of view or ack goes round again at once."""
        while not stop.is_set():
            changed = self.tick()
            self.after_tick()
            if self._lost():
                self.on_lost()
                return
            if not changed:
                self._wake.wait(self.retry_period)
            self._wake.clear()

    def tick(self) -> bool:
        """One renew-then-read; True when the view or our ack changed (so go round again)."""
        ack_changed = self._renew()
        records = self._read()
        view_changed = records is not None and self._observe(records)
        return ack_changed or view_changed

    def leave(self) -> None:
        """After the last run ended on a clean stop: delete our Lease so the others take over at once."""
        self.leases.delete()
        self.joined.clear()

    def _renew(self) -> bool:
        with self._lock:
            drained = shards.drained(self._view, self.me, self._in_flight.values())
            ack = self._view if drained else self._ack
        started = self._clock()
        try:
            self.leases.renew(shards.encode_ack(ack) if ack is not None else None)
        except ApiError as exc:
            log.warning("cannot renew member lease %s: %s", self.leases.name, exc)
            with self._lock:
                if ack != self._ack:
                    # The write may have reached the server after all: what our Lease says is unknown, so
                    # start nothing until a write of ours is known to have landed.
                    self._ack, self._writes = None, self._writes + 1
            return False
        self._last_renew = started
        with self._lock:
            changed = ack != self._ack
            if changed:
                self._ack, self._writes = ack, self._writes + 1
            if ack is not None and self.me in ack and ack == self._view:
                self.joined.set()
        if changed:
            log.info("drained for ring %s", sorted(ack or ()))
        return changed

    def _read(self) -> list[Record] | None:
        with self._lock:
            writes = self._writes
        try:
            records = self.leases.list()
        except ApiError as exc:
            log.warning("cannot list the ring's leases: %s", exc)
            return None
        with self._lock:
            self._read_after = writes
        return records

    def _observe(self, records: list[Record]) -> bool:
        now = self._clock()
        live: dict[str, Peer] = {}
        mine = False
        seen = set()
        for record in records:
            seen.add(record.lease)
            if record.member == self.me:
                mine = True
                continue
            stamp, since = self._observed.get(record.lease, ("", now))
            if record.renewed != stamp or record.lease not in self._observed:
                since = now
            self._observed[record.lease] = (record.renewed, since)
            if now - since < record.duration:
                live[record.member] = Peer(record.member, shards.parse_ack(record.ack))
        for gone in set(self._observed) - seen:
            del self._observed[gone]
        view = frozenset(live) | ({self.me} if mine else frozenset())
        with self._lock:
            old, self._view, self._peers = self._view, view, live
        if not mine and self.joined.is_set():
            # Someone deleted our Lease: the others count us gone and may take our objects now.
            log.error("member lease %s disappeared from the ring", self.leases.name)
            self._gone = True
        if view == old:
            return False
        metrics.RING_CHANGES.inc()
        metrics.RING_MEMBERS.set(len(view))
        log.info("ring view changed: %s -> %s", sorted(old), sorted(view))
        self.on_view(old, view)
        return True

    def _lost(self) -> bool:
        """True when our Lease went unrenewed past the deadline after we had joined."""
        overdue = self._clock() - self._last_renew > self.renew_deadline
        return self._gone or (self.joined.is_set() and overdue)


def member_id() -> str:
    """This replica's id in the ring: the pod's name (``POD_NAME``, from the downward API), else host and pid."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def abandon() -> None:
    """Our Lease could not be kept: the others will soon run our objects, so nothing of ours may run on.

    Exit at once, without draining: the warm executor's zygote sees its socket close and kills every run
    it started (``ansible.zygote``: SIGTERM, then SIGKILL 0.2 s later).
    """
    log.critical("lost the sharding lease; exiting now so that no run of ours overlaps another replica's")
    logging.shutdown()
    os._exit(1)
