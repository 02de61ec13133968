"""What tests of every kind share: waiting for a condition, reading a resource's status conditions, and
the metric checks of operator-sdk's memcached-molecule-operator.

Unit tests wait for threads, integration tests for the API server, real-node tests for kubectl: all with
``wait_until``, which polls quickly at first and then backs off to ``interval``, so a unit test's wait
takes milliseconds and an integration test's does not hammer the API server it shares with other workers.
The integration conftest re-exports ``wait_until``, ``condition`` and ``successful`` for its tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kubernetes.client.rest import ApiException

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, what: str = "the condition", interval: float = 0.2) -> T:
    """Poll ``predicate`` until it returns something true, and return that; an ``AssertionError`` naming
    ``what`` after ``timeout`` seconds. The first polls come after a millisecond, doubling up to
    ``interval``. An ``ApiException`` counts as "not yet" (an API server restarting, an object not made
    yet); the last one is in the error."""
    deadline = time.monotonic() + timeout
    pause = min(0.001, interval)
    last_exc: ApiException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except ApiException as exc:
            last_exc = exc
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}" + (f" ({last_exc})" if last_exc else "")
            )
        time.sleep(pause)
        pause = min(pause * 2, interval)


def condition(obj: Mapping[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    """The status condition of type ``ctype`` of a resource (a dict as the API returns it), or None."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def successful(obj: Mapping[str, Any] | None, generation: int | None = None) -> bool:
    """The resource's Successful condition is True (and, with ``generation``, its status has observed that
    generation): a run of the operator converged it."""
    if (condition(obj, "Successful") or {}).get("status") != "True":
        return False
    return generation is None or ((obj or {}).get("status") or {}).get("observedGeneration") == generation


# operator-sdk's memcached-molecule-operator/molecule/default/tasks/memcached_test.yml asserts these strings
# on the operator's /metrics after its role's operator_sdk.util.osdk_metric calls; so do we.
UPSTREAM_METRIC_CHECKS = (
    "sanity_counter 0",
    "sanity_gauge 0",
    "sanity_histogram_bucket",
    "sanity_summary summary",
    "counter_inc_test 1",
    "counter_add_test 2",
    "gauge_set_test 5",
    "gauge_add_test 7",
    "gauge_sub_test -7",
    "gauge_time_test 1",
    "summary_test_sum 2",
    "histogram_test_sum 2",
)


def missing_upstream_metrics(text: str) -> list[str]:
    """The checks of ``UPSTREAM_METRIC_CHECKS`` that the metrics text ``text`` fails."""
    return [check for check in UPSTREAM_METRIC_CHECKS if check not in text]
