"""Who may read the metrics: a bearer token, checked by the API server, as ``--metrics-require-rbac`` asks.

``health`` asks a ``Gate`` about every request on the metrics server when ``cli`` built one; the gate asks
the API server through ``kube.reviews``. The decision is controller-runtime's (its metrics filter
``WithAuthenticationAndAuthorization``): no usable ``Authorization: Bearer`` header or a token the
TokenReview does not authenticate is 401; an authenticated caller the SubjectAccessReview does not allow
to ``get`` the request's path as a non-resource URL is 403 (the ``metrics-reader`` ClusterRole grants
``get`` on ``/metrics``); otherwise the request is served. When a review cannot be made (the API server
is unreachable, or refuses the operator the review) the answer is 503: the caller did nothing wrong.

Each answer is remembered for ``ttl`` seconds (10 by default), keyed by a hash of the token, so a
Prometheus scraping every few seconds costs the API server two reviews per ten seconds, not per scrape.
Failed reviews are remembered too, in a cache of their own, so a caller repeating a bad token is not a way
to flood the API server and a flood of bad tokens cannot push a good answer out; both caches are bounded
(least recently used out first), and tokens no API server would issue (too long, not printable) never
reach them.

A flood of *distinct* tokens misses every cache, so the reviews themselves are rate-limited (``Limits``):
a token bucket per client address (an IPv6 caller by its /64, which one host usually holds whole) and one
for all callers together, so whatever comes in, the API server gets at most ``total_burst`` reviews and then
``total_rate`` a second from us. A request over the limit is answered 429 with ``Retry-After``, without
asking: 401 would claim the token is bad when nobody looked at it (a scraper sharing an address with the
flood would be told to fix its credentials), and a 429 is neither remembered nor counted against the
token. Cached answers cost nothing and are never limited, so a scraper whose answer is remembered keeps
being served during a flood.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from hybrid_operator.errors import TemporaryError
from hybrid_operator.kube import reviews
from hybrid_operator.kube.client import Kube
from hybrid_operator.kube.reviews import Identity

log = logging.getLogger(__name__)

MAX_TOKEN_LENGTH = 16384  # service account JWTs are 1-2 KB; anything near this is not a token

K = TypeVar("K")
V = TypeVar("V")
ReviewToken = Callable[[str], Identity | None]
MayAccess = Callable[[Identity, str, str], bool]


@dataclass(frozen=True)
class Decision:
    status: int  # 200 serve, 401 who are you, 403 not you, 429 too many reviews, 503 could not ask
    reason: str
    retry_after: int = 0  # seconds, for a 429

    @property
    def allowed(self) -> bool:
        return self.status == 200


UNAUTHENTICATED = Decision(401, "Unauthorized")


@dataclass(frozen=True)
class Limits:
    """How many reviews (TokenReviews and SubjectAccessReviews) the gate asks the API server for.

    A scraper needs two per ``ttl`` per address it scrapes from; the per-client numbers leave it ample room
    and hold one flooding client to a trickle, the total ones hold any number of clients together.
    """

    client_rate: float = 1.0  # reviews a second, sustained, per client address
    client_burst: float = 10.0
    total_rate: float = 10.0  # for all clients together
    total_burst: float = 50.0
    max_clients: int = 4096  # addresses remembered; past it the least recently seen is forgotten


LIMITS = Limits()


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme in any case), or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    if not token.isascii() or not token.isprintable() or " " in token:
        return None
    return token


def client_key(host: str) -> str:
    """What one client is for the rate limit: its IPv4 address, or the /64 of its IPv6 address."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host  # not an address (a Unix socket, a test): itself
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class _Throttled(Exception):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"retry after {retry_after:.1f}s")
        self.retry_after = retry_after


class Gate:
    """Decides requests to the metrics server; thread-safe, answers cached for ``ttl`` seconds."""

    def __init__(
        self,
        review_token: ReviewToken,
        may_access: MayAccess,
        ttl: float = 10.0,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
        limits: Limits | None = LIMITS,
    ) -> None:
        self._review_token = review_token
        self._may_access = may_access
        self._lock = threading.Lock()
        # A token the API server vouched for and one it did not are kept apart: bogus tokens, however
        # many, only ever evict each other.
        self._identities: _Cache[str, Identity] = _Cache(ttl, max_entries, clock)
        self._unknown: _Cache[str, bool] = _Cache(ttl, max_entries, clock)
        self._verdicts: _Cache[tuple[Identity, str, str], bool] = _Cache(ttl, max_entries, clock)
        self._budget = _Budget(limits, clock) if limits is not None else None
        self.reviews = 0  # API requests made, for tests

    def decide(self, authorization: str | None, method: str, path: str, client: str = "") -> Decision:
        """The answer to ``method path`` with that Authorization header from the client at ``client``."""
        token = bearer_token(authorization)
        if token is None:
            return UNAUTHENTICATED
        verb = method.lower()
        try:
            who = self._identity(token, client)
            if who is None:
                return UNAUTHENTICATED
            if not self._allowed(who, verb, path, client):
                return Decision(403, f'Forbidden: user "{who.username}" may not {verb} {path}')
        except _Throttled as exc:
            wait = math.ceil(min(exc.retry_after, 3600.0))  # a rate of 0 would say "never"
            return Decision(429, "Too Many Requests: too many new tokens to check", wait)
        except TemporaryError as exc:
            log.warning("cannot check a metrics caller with the API server: %s", exc)
            return Decision(503, "Service Unavailable: the API server could not be asked who the caller is")
        return Decision(200, "OK")

    def _identity(self, token: str, client: str) -> Identity | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            found = self._identities.get(key)
            if found is not None:
                return found
            if self._unknown.get(key) is not None:
                return None
            self._spend(client)
        who = self._review_token(token)  # outside the lock: one slow review holds up no other caller
        with self._lock:
            if who is None:
                self._unknown.put(key, True)
            else:
                self._identities.put(key, who)
        return who

    def _allowed(self, who: Identity, verb: str, path: str, client: str) -> bool:
        key = (who, verb, path)
        with self._lock:
            found = self._verdicts.get(key)
            if found is not None:
                return found
            self._spend(client)  # a good token asking for ever new paths is a flood too
        allowed = self._may_access(who, verb, path)
        with self._lock:
            self._verdicts.put(key, allowed)
        return allowed

    def _spend(self, client: str) -> None:
        """Count one review against ``client`` (under the lock), or raise ``_Throttled``."""
        if self._budget is not None:
            wait = self._budget.take(client_key(client))
            if wait > 0:
                raise _Throttled(wait)
        self.reviews += 1


class _Cache(Generic[K, V]):
    """Answers for ``ttl`` seconds, at most ``size`` of them, the least recently used forgotten first.

    Not thread-safe: the gate holds its lock around every use.
    """

    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self._ttl, self._size, self._clock = ttl, size, clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: K, value: V) -> None:
        self._entries[key] = (self._clock() + self._ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


class _Bucket:
    """A token bucket: ``burst`` at most, refilled at ``rate`` a second."""

    __slots__ = ("at", "tokens")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens, self.at = tokens, at

    def refill(self, rate: float, burst: float, now: float) -> None:
        self.tokens = min(burst, self.tokens + max(0.0, now - self.at) * rate)
        self.at = now

    def wait(self, rate: float) -> float:
        """Seconds until one token is there (0: now)."""
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / rate if rate > 0 else math.inf


class _Budget:
    """The per-client and total buckets of ``Limits``; not thread-safe (the gate's lock)."""

    def __init__(self, limits: Limits, clock: Callable[[], float]) -> None:
        self._limits, self._clock = limits, clock
        self._total = _Bucket(limits.total_burst, clock())
        self._clients: OrderedDict[str, _Bucket] = OrderedDict()

    def take(self, client: str) -> float:
        """0 when one review may be made now (and it is counted), else the seconds until one may."""
        lim, now = self._limits, self._clock()
        bucket = self._clients.get(client)
        if bucket is None:
            bucket = self._clients[client] = _Bucket(lim.client_burst, now)
            while len(self._clients) > lim.max_clients:
                # Forgetting a client gives it a full bucket again; the total bucket bounds what that buys.
                self._clients.popitem(last=False)
        self._clients.move_to_end(client)
        bucket.refill(lim.client_rate, lim.client_burst, now)
        self._total.refill(lim.total_rate, lim.total_burst, now)
        # Both checked before either is spent: a client refused by its own bucket costs the others nothing.
        wait = max(bucket.wait(lim.client_rate), self._total.wait(lim.total_rate))
        if wait == 0:
            bucket.tokens -= 1
            self._total.tokens -= 1
        return wait


def gate_for(kubeconfig: str | None) -> Gate:
    """A gate that asks the API server of ``kubeconfig`` (or the pod's), on a connection of its own."""
    kube = Kube.connect(kubeconfig)
    return Gate(
        lambda token: reviews.review_token(kube, token),
        lambda who, verb, path: reviews.may_access(kube, who, verb, path),
    )
