"""The metrics gate: which requests get 401, 403, 429, 503 or the metrics, what it remembers, how many
reviews a flood of tokens costs the API server.

The two API calls are plain functions here that answer like the API server would for a few known tokens;
tests/integration/test_metrics_auth.py asks the real one.
"""

from __future__ import annotations

import collections

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.errors import TemporaryError
from hybrid_operator.kube.reviews import Identity
from hybrid_operator.serving.metricsauth import MAX_TOKEN_LENGTH, Gate, Limits, bearer_token, client_key

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
    # Without the rate limit: these tests are about the answers and the caches; the limit has its own below.
    return Gate(api.review_token, api.may_access, ttl=10, max_entries=4, clock=clock, limits=None)


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


# -- the rate limit on reviews ------------------------------------------------------------------------

LIMITS = Limits(client_rate=1, client_burst=10, total_rate=10, total_burst=50, max_clients=64)


@pytest.fixture
def limited(api: ApiServer, clock: Clock) -> Gate:
    return Gate(api.review_token, api.may_access, ttl=10, max_entries=64, clock=clock, limits=LIMITS)


def flood(gate: Gate, clock: Clock, tokens: int, seconds: float, clients: list[str]) -> list[int]:
    """``tokens`` distinct bogus tokens spread evenly over ``seconds``, the clients taking turns."""
    statuses = []
    for i in range(tokens):
        statuses.append(gate.decide(f"Bearer bogus-{i}", "GET", "/metrics", clients[i % len(clients)]).status)
        clock.now += seconds / tokens
    return statuses


def test_a_flood_from_one_address_costs_its_burst_and_then_its_rate(
    limited: Gate, api: ApiServer, clock: Clock
) -> None:
    """The issue's flood: 2,000 distinct bogus tokens in 19 s made 2,002 TokenReviews."""
    statuses = flood(limited, clock, 2000, 19.0, ["10.0.0.7"])
    assert len(api.calls) == limited.reviews <= 10 + 19  # burst, then one a second
    assert len(api.calls) >= 28
    assert statuses.count(401) == len(api.calls) and statuses.count(429) == 2000 - len(api.calls)


def test_a_flood_from_a_few_addresses_costs_each_its_own_budget(limited: Gate, api: ApiServer, clock: Clock) -> None:
    flood(limited, clock, 2000, 19.0, ["10.0.0.7", "10.0.0.8", "10.0.0.9"])
    assert 3 * 28 <= len(api.calls) <= 3 * (10 + 19)


def test_a_flood_from_many_addresses_is_held_by_the_total(limited: Gate, api: ApiServer, clock: Clock) -> None:
    flood(limited, clock, 2000, 19.0, [f"10.0.{i // 250}.{i % 250}" for i in range(500)])
    assert len(api.calls) <= 50 + 10 * 19


@settings(max_examples=100, deadline=None)
@given(
    requests=st.lists(
        st.tuples(st.integers(min_value=0, max_value=200), st.floats(min_value=0, max_value=2)), max_size=400
    )
)
def test_no_flood_gets_more_than_the_limits(requests: list[tuple[int, float]]) -> None:
    """Whatever the mix of addresses and timing: per address burst + rate x time, in total the same."""
    api, clock = ApiServer(), Clock()
    gate = Gate(api.review_token, api.may_access, clock=clock, limits=LIMITS)
    start, per_client = clock.now, collections.Counter[int]()
    for i, (client, pause) in enumerate(requests):
        clock.now += pause
        before = len(api.calls)
        status = gate.decide(f"Bearer bogus-{i}", "GET", "/metrics", f"10.1.0.{client}").status
        per_client[client] += len(api.calls) - before
        assert status in (401, 429)
    elapsed = clock.now - start
    # Forgotten clients (more than max_clients) start with a full bucket again; the total still holds.
    assert len(api.calls) <= LIMITS.total_burst + LIMITS.total_rate * elapsed + 1e-6
    if len({c for c, _ in requests}) <= LIMITS.max_clients:
        assert all(n <= LIMITS.client_burst + LIMITS.client_rate * elapsed + 1e-6 for n in per_client.values())


def test_over_the_limit_is_429_with_retry_after_and_not_remembered(limited: Gate, api: ApiServer, clock: Clock) -> None:
    flood(limited, clock, 10, 0, ["10.0.0.7"])
    decision = limited.decide("Bearer reader-token", "GET", "/metrics", "10.0.0.7")
    assert (decision.status, decision.retry_after) == (429, 1)
    assert ("token", "reader-token") not in api.calls
    clock.now += 2  # two reviews' worth: the token's and the access review
    assert limited.decide("Bearer reader-token", "GET", "/metrics", "10.0.0.7").allowed


def test_a_scraper_keeps_its_answer_and_its_budget_during_a_flood(limited: Gate, api: ApiServer, clock: Clock) -> None:
    assert limited.decide("Bearer reader-token", "GET", "/metrics", "10.0.0.7").allowed
    flood(limited, clock, 500, 5.0, ["10.0.0.7"])  # from the same address: the answer is remembered
    assert limited.decide("Bearer reader-token", "GET", "/metrics", "10.0.0.7").allowed
    clock.now += 10  # the answer expired; another address has a budget of its own
    flood(limited, clock, 500, 0, ["10.9.9.9"])
    assert limited.decide("Bearer reader-token", "GET", "/metrics", "10.0.0.7").allowed


def test_bogus_tokens_never_push_a_good_answer_out(api: ApiServer, clock: Clock) -> None:
    gate = Gate(api.review_token, api.may_access, ttl=10, max_entries=4, clock=clock, limits=None)
    assert gate.decide("Bearer reader-token", "GET", "/metrics").allowed
    for i in range(50):
        assert gate.decide(f"Bearer random-{i}", "GET", "/metrics").status == 401
    assert len(gate._unknown) <= 4 and not any("random" in key for key in gate._unknown)
    calls = len(api.calls)
    assert gate.decide("Bearer reader-token", "GET", "/metrics").allowed
    assert len(api.calls) == calls  # still remembered


def test_a_good_token_asking_for_ever_new_paths_is_limited_too(limited: Gate, api: ApiServer) -> None:
    statuses = [limited.decide("Bearer reader-token", "GET", f"/metrics/{i}", "10.0.0.7").status for i in range(30)]
    assert len(api.calls) == 10 and statuses.count(429) == 21  # one token review, nine access reviews


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("10.0.0.7", "10.0.0.7"),
        ("::ffff:10.0.0.7", "10.0.0.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("", ""),
    ],
)
def test_a_client_is_its_ipv4_address_or_its_ipv6_64(host: str, key: str) -> None:
    assert client_key(host) == key
