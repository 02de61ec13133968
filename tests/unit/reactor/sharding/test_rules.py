"""shards: rendezvous ownership (spread, ~1/N movement), the run rule of the drain handshake, hostile acks."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybrid_operator.reactor.sharding import rules as shards
from hybrid_operator.reactor.sharding.rules import Peer, Verdict

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UIDS = [str(uuid.UUID(int=i * 7919 + 1)) for i in range(3000)]
member_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)


def test_every_member_gets_a_fair_share() -> None:
    members = [f"replica-{i}" for i in range(4)]
    counts = Counter(shards.owner(uid, members) for uid in UIDS)
    assert set(counts) == set(members)
    for member in members:
        assert abs(counts[member] - len(UIDS) / 4) < len(UIDS) * 0.05, counts


def test_owner_does_not_depend_on_the_order_of_members() -> None:
    assert all(shards.owner(u, ["a", "b", "c"]) == shards.owner(u, ["c", "a", "b"]) for u in UIDS[:200])
    assert shards.owner("x", []) is None


@SETTINGS
@given(st.sets(member_ids, min_size=1, max_size=8), member_ids)
def test_a_member_joining_moves_only_objects_to_itself_about_1_in_n(members: set[str], newcomer: str) -> None:
    if newcomer in members:
        return
    grown = members | {newcomer}
    moved = [u for u in UIDS if shards.owner(u, members) != shards.owner(u, grown)]
    assert all(shards.owner(u, grown) == newcomer for u in moved)  # nothing moves between the old ones
    assert abs(len(moved) / len(UIDS) - 1 / len(grown)) < 0.05


@SETTINGS
@given(st.sets(member_ids, min_size=2, max_size=8), st.data())
def test_a_member_leaving_moves_only_its_own_objects(members: set[str], data: st.DataObject) -> None:
    leaver = data.draw(st.sampled_from(sorted(members)))
    shrunk = members - {leaver}
    moved = [u for u in UIDS if shards.owner(u, members) != shards.owner(u, shrunk)]
    assert all(shards.owner(u, members) == leaver for u in moved)
    assert abs(len(moved) / len(UIDS) - 1 / len(members)) < 0.05


def uid_owned_by(member: str, view: frozenset[str]) -> str:
    return next(u for u in UIDS if shards.owner(u, view) == member)


AB = frozenset({"a", "b"})
ABC = frozenset({"a", "b", "c"})


def test_a_member_runs_its_object_once_every_peer_has_drained_for_the_view() -> None:
    uid = uid_owned_by("a", AB)
    assert shards.decide(uid, "a", AB, AB, {"b": Peer("b", AB)}) is Verdict.RUN


def test_an_object_of_another_member_is_dropped() -> None:
    uid = uid_owned_by("b", AB)
    assert shards.decide(uid, "a", AB, AB, {"b": Peer("b", AB)}) is Verdict.DROP


def test_our_own_ack_must_claim_the_object_before_we_start_it() -> None:
    uid = uid_owned_by("a", AB)
    assert shards.decide(uid, "a", AB, None, {"b": Peer("b", AB)}) is Verdict.WAIT
    assert shards.decide(uid, "a", AB, frozenset(), {"b": Peer("b", AB)}) is Verdict.WAIT


def test_join_waits_for_the_old_owner_to_drain() -> None:
    """c joins: it owns some of a's objects under {a,b,c}; while a's ack is still {a,b}, c must wait."""
    uid = next(u for u in UIDS if shards.owner(u, ABC) == "c" and shards.owner(u, AB) == "a")
    peers = {"a": Peer("a", AB), "b": Peer("b", ABC)}
    assert shards.decide(uid, "c", ABC, ABC, peers) is Verdict.WAIT
    peers["a"] = Peer("a", ABC)  # a has drained for the new view
    assert shards.decide(uid, "c", ABC, ABC, peers) is Verdict.RUN


def test_join_does_not_wait_for_a_peer_whose_old_view_never_gave_it_the_object() -> None:
    uid = next(u for u in UIDS if shards.owner(u, ABC) == "c" and shards.owner(u, AB) == "a")
    peers = {"a": Peer("a", ABC), "b": Peer("b", AB)}  # b has not drained yet, but never owned it
    assert shards.decide(uid, "c", ABC, ABC, peers) is Verdict.RUN


def test_leave_and_expiry_the_gone_member_is_simply_not_a_peer() -> None:
    """b's Lease expired or was deleted: it is out of the view; a runs b's objects once c agrees."""
    ac = frozenset({"a", "c"})
    uid = next(u for u in UIDS if shards.owner(u, ABC) == "b" and shards.owner(u, ac) == "a")
    assert shards.decide(uid, "a", ac, ac, {"c": Peer("c", ABC)}) is Verdict.RUN  # c never owned it
    uid_c = next(u for u in UIDS if shards.owner(u, ABC) == "c")
    assert shards.decide(uid_c, "a", ac, ac, {"c": Peer("c", ABC)}) is not Verdict.RUN


def test_a_new_member_that_claims_nothing_blocks_nothing() -> None:
    uid = uid_owned_by("a", ABC)
    peers = {"b": Peer("b", ABC), "c": Peer("c", frozenset())}
    assert shards.decide(uid, "a", ABC, ABC, peers) is Verdict.RUN


def test_a_peer_without_a_readable_ack_blocks_every_start() -> None:
    uid = uid_owned_by("a", AB)
    assert shards.decide(uid, "a", AB, AB, {"b": Peer("b", None)}) is Verdict.WAIT


def test_drained_only_when_no_run_is_of_an_object_we_no_longer_own() -> None:
    mine, theirs = uid_owned_by("a", AB), uid_owned_by("b", AB)
    assert shards.drained(AB, "a", [mine])
    assert not shards.drained(AB, "a", [mine, theirs])
    assert shards.drained(AB, "a", [])


def test_an_ack_round_trips() -> None:
    assert shards.parse_ack(shards.encode_ack(ABC)) == ABC
    assert shards.parse_ack("[]") == frozenset()


@pytest.mark.parametrize(
    "raw",
    [
        None,
        42,
        ["a"],
        "",
        "not json",
        "{",
        '{"a": 1}',
        "[1, 2]",
        '[""]',
        json.dumps(["x" * 300]),
        json.dumps([f"m{i}" for i in range(shards.MAX_MEMBERS + 1)]),
        "[" * 100000,
        json.dumps(["a"]) + " " * shards.MAX_ACK_BYTES,
        '[null, "a"]',
    ],
    ids=lambda raw: repr(raw)[:30],
)
def test_a_hostile_ack_is_not_acknowledged(raw: object) -> None:
    assert shards.parse_ack(raw) is None


@SETTINGS
@given(st.text(max_size=200) | st.binary(max_size=50).map(repr))
def test_parse_ack_never_raises(raw: str) -> None:
    result = shards.parse_ack(raw)
    assert result is None or isinstance(result, frozenset)
