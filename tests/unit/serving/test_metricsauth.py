"""The metrics gate: which requests get 401, 403, 503 or the metrics, and what it remembers.

The two API calls are plain functions here that answer like the API server would for a few known tokens;
tests/integration/test_metrics_auth.py asks the real one.
"""

from __future__ import annotations

import pytest

from hybrid_operator.errors import TemporaryError
from hybrid_operator.kube.reviews import Identity
from hybrid_operator.serving.metricsauth import MAX_TOKEN_LENGTH, Gate, bearer_token

READER = Identity("system:serviceaccount:monitoring:prometheus", "u-1", ("system:serviceaccounts",), ())
STRANGER = Identity("system:serviceaccount:default:default", "u-2", ("system:serviceaccounts",), ())
TOKENS = {"reader-token": READER, "stranger-token": STRANGER}


class ApiServer:
    """Answers TokenReviews and SubjectAccessReviews from the tables above, and counts them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.down = False

    def review_token(self, token: str) -> Identity | None:
        self.calls.append(("token", token))
        if self.down:
            raise TemporaryError("API server answered 0: connection refused")
        return TOKENS.get(token)

    def may_access(self, who: Identity, verb: str, path: str) -> bool:
        self.calls.append(("access", who.username, verb, path))
        return who == READER and verb == "get" and path == "/metrics"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> ApiServer:
    return ApiServer()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def gate(api: ApiServer, clock: Clock) -> Gate:
    return Gate(api.review_token, api.may_access, ttl=10, max_entries=4, clock=clock)


def test_a_reader_gets_the_metrics(gate: Gate, api: ApiServer) -> None:
    decision = gate.decide("Bearer reader-token", "GET", "/metrics")
    assert (decision.status, decision.allowed) == (200, True)
    assert api.calls == [("token", "reader-token"), ("access", READER.username, "get", "/metrics")]


def test_an_authenticated_caller_without_the_role_is_forbidden(gate: Gate) -> None:
    decision = gate.decide("Bearer stranger-token", "GET", "/metrics")
    assert decision.status == 403
    assert STRANGER.username in decision.reason


def test_the_path_asked_about_is_the_requested_one(gate: Gate, api: ApiServer) -> None:
    assert gate.decide("Bearer reader-token", "GET", "/healthz").status == 403
    assert api.calls[-1] == ("access", READER.username, "get", "/healthz")


def test_an_unknown_token_is_unauthenticated(gate: Gate) -> None:
    assert gate.decide("Bearer forged", "GET", "/metrics").status == 401


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic cmVhZGVyOnNlY3JldA==",
        "Token reader-token",
        "Bearer reader token",
        "Bearer reader-token\x00",
        "Bearer rëader-token",
        "Bearer " + "a" * (MAX_TOKEN_LENGTH + 1),
    ],
)
def test_no_usable_bearer_token_is_401_without_asking(header: str | None, gate: Gate, api: ApiServer) -> None:
    assert gate.decide(header, "GET", "/metrics").status == 401
    assert api.calls == []


def test_the_scheme_is_case_insensitive() -> None:
    assert bearer_token("bearer abc") == bearer_token("BEARER  abc ") == "abc"


def test_answers_are_remembered_for_the_ttl(gate: Gate, api: ApiServer, clock: Clock) -> None:
    for _ in range(5):
        assert gate.decide("Bearer reader-token", "GET", "/metrics").allowed
        assert gate.decide("Bearer forged", "GET", "/metrics").status == 401
    assert len(api.calls) == 3  # one review per token, one access review for the reader
    clock.now += 10
    assert gate.decide("Bearer reader-token", "GET", "/metrics").allowed
    assert len(api.calls) == 5


def test_a_revoked_token_stops_working_after_the_ttl(gate: Gate, clock: Clock) -> None:
    assert gate.decide("Bearer reader-token", "GET", "/metrics").allowed
    del TOKENS["reader-token"]
    try:
        assert gate.decide("Bearer reader-token", "GET", "/metrics").allowed  # still remembered
        clock.now += 10.5
        assert gate.decide("Bearer reader-token", "GET", "/metrics").status == 401
    finally:
        TOKENS["reader-token"] = READER


def test_an_unreachable_api_server_is_503_and_not_remembered(gate: Gate, api: ApiServer) -> None:
    api.down = True
    assert gate.decide("Bearer reader-token", "GET", "/metrics").status == 503
    api.down = False
    assert gate.decide("Bearer reader-token", "GET", "/metrics").allowed


def test_the_cache_is_bounded_and_keeps_no_token(gate: Gate, api: ApiServer) -> None:
    """A flood of random tokens costs one review each and never grows memory past the bound."""
    for i in range(50):
        assert gate.decide(f"Bearer random-{i}", "GET", "/metrics").status == 401
    identities = gate._identities
    assert len(identities) <= 4
    assert not any("random" in key for key in identities)
    assert len(api.calls) == 50
