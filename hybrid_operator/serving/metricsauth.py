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
Failed reviews are remembered too, so a caller repeating a bad token is not a way to flood the API server;
the cache is bounded, and tokens no API server would issue (too long, not printable) never reach it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

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
    status: int  # 200 serve, 401 who are you, 403 not you, 503 could not ask
    reason: str

    @property
    def allowed(self) -> bool:
        return self.status == 200


UNAUTHENTICATED = Decision(401, "Unauthorized")


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


class Gate:
    """Decides requests to the metrics server; thread-safe, answers cached for ``ttl`` seconds."""

    def __init__(
        self,
        review_token: ReviewToken,
        may_access: MayAccess,
        ttl: float = 10.0,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._review_token = review_token
        self._may_access = may_access
        self._ttl = ttl
        self._max = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._identities: dict[str, tuple[float, Identity | None]] = {}
        self._verdicts: dict[tuple[Identity, str, str], tuple[float, bool]] = {}
        self.reviews = 0  # API requests made, for tests

    def decide(self, authorization: str | None, method: str, path: str) -> Decision:
        token = bearer_token(authorization)
        if token is None:
            return UNAUTHENTICATED
        verb = method.lower()
        try:
            who = self._identity(token)
            if who is None:
                return UNAUTHENTICATED
            if not self._allowed(who, verb, path):
                return Decision(403, f'Forbidden: user "{who.username}" may not {verb} {path}')
        except TemporaryError as exc:
            log.warning("cannot check a metrics caller with the API server: %s", exc)
            return Decision(503, "Service Unavailable: the API server could not be asked who the caller is")
        return Decision(200, "OK")

    def _identity(self, token: str) -> Identity | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        found = self._cached(self._identities, key)
        if found is not None:
            return found[0]
        self.reviews += 1
        who = self._review_token(token)
        self._remember(self._identities, key, who)
        return who

    def _allowed(self, who: Identity, verb: str, path: str) -> bool:
        key = (who, verb, path)
        found = self._cached(self._verdicts, key)
        if found is not None:
            return found[0]
        self.reviews += 1
        allowed = self._may_access(who, verb, path)
        self._remember(self._verdicts, key, allowed)
        return allowed

    def _cached(self, cache: dict[K, tuple[float, V]], key: K) -> tuple[V] | None:
        with self._lock:
            entry = cache.get(key)
            if entry is None:
                return None
            if entry[0] <= self._clock():
                del cache[key]
                return None
            return (entry[1],)

    def _remember(self, cache: dict[K, tuple[float, V]], key: K, value: V) -> None:
        now = self._clock()
        with self._lock:
            if len(cache) >= self._max:
                for stale in [k for k, (expires, _) in cache.items() if expires <= now]:
                    del cache[stale]
            while len(cache) >= self._max:  # still full: forget the oldest answer
                del cache[next(iter(cache))]
            cache[key] = (now + self._ttl, value)


def gate_for(kubeconfig: str | None) -> Gate:
    """A gate that asks the API server of ``kubeconfig`` (or the pod's), on a connection of its own."""
    kube = Kube.connect(kubeconfig)
    return Gate(
        lambda token: reviews.review_token(kube, token),
        lambda who, verb, path: reviews.may_access(kube, who, verb, path),
    )
