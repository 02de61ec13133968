"""Sharding's pure core: who owns an object, what a member's drain acknowledgement says, and who may run.

Used by ``reactor.sharding`` (the ring a replica keeps) with what ``kube.members`` read from the Leases;
nothing here talks to the API server or keeps state, so the rules are tested on their own.

Ownership is rendezvous (highest random weight) hashing of the object's uid over the live members' ids:
every member computes the same owner from the same set, and a member joining or leaving moves only the
objects it wins or held (about 1/N of them).

The handshake that keeps two replicas from ever running one object at once. Each member publishes, in its
own Lease, the member set it has *drained for* (its ack): "under this set I start no run for an object I
do not own, and none is in progress". A member therefore runs an object only while its published ack gives
it that object, and *starts* one only when its current view gives it the object too and every other live
member's ack (read after our own ack was written) gives the object to someone else. Two members starting
one object would each have written an ack claiming it before reading the other's: whichever read came
second sees the other's claim (the API server's reads are linearizable), so at most one starts. An ack that
cannot be parsed claims everything: it blocks, never admits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

MAX_ACK_BYTES = 64 * 1024  # an annotation larger than this is not read
MAX_MEMBERS = 1000  # members one ack may name
MAX_ID_CHARS = 253  # a member id (a pod name at most)

Members = frozenset[str]


def _score(member: str, uid: str) -> int:
    digest = hashlib.blake2b(f"{member}\0{uid}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(uid: str, members: Iterable[str]) -> str | None:
    """The member that owns ``uid`` among ``members`` (None when there is none); ties go to the larger id."""
    best: tuple[int, str] | None = None
    for member in members:
        candidate = (_score(member, uid), member)
        if best is None or candidate > best:
            best = candidate
    return None if best is None else best[1]


def encode_ack(members: Members) -> str:
    """The annotation value for an ack: the member ids, sorted, as a JSON list."""
    return json.dumps(sorted(members), separators=(",", ":"))


def parse_ack(raw: object) -> Members | None:
    """A peer's ack from its annotation; None (not acknowledged) for anything but a bounded list of ids."""
    if not isinstance(raw, str) or len(raw) > MAX_ACK_BYTES:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, list) or len(value) > MAX_MEMBERS:
        return None
    if not all(isinstance(m, str) and 0 < len(m) <= MAX_ID_CHARS for m in value):
        return None
    return frozenset(value)


class Verdict(Enum):
    RUN = "run"  # start it now
    WAIT = "wait"  # ours, but a peer has not drained for it yet: park and try again when acks change
    DROP = "drop"  # not ours (or not ours yet): never run here


@dataclass(frozen=True)
class Peer:
    """Another live member as the ring last read it: its id and its ack (None: unreadable or none yet)."""

    member: str
    ack: Members | None


def decide(uid: str, me: str, view: Members, my_ack: Members | None, peers: Mapping[str, Peer]) -> Verdict:
    """May ``me`` start a run of the object ``uid`` now?

    ``view``: the live members as ``me`` sees them; ``my_ack``: what ``me`` has published (and the peers'
    acks must have been read after that was written); ``peers``: the other live members.
    """
    if owner(uid, view) != me:
        return Verdict.DROP
    if my_ack is None or owner(uid, my_ack) != me:
        return Verdict.WAIT  # our own ack does not claim it yet: publish first
    for peer in peers.values():
        if peer.member == me:
            continue
        if peer.ack is None or owner(uid, peer.ack) == peer.member:
            return Verdict.WAIT
    return Verdict.RUN


def drained(view: Members, me: str, in_flight: Iterable[str]) -> bool:
    """True when no run in progress (by uid) is of an object ``me`` does not own under ``view``."""
    return all(owner(uid, view) == me for uid in in_flight)
