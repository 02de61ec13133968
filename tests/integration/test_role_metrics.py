"""Custom metrics from roles on the real test bed: operator_sdk.util.osdk_metric to the operator's /metrics.

The role makes the calls of operator-sdk's memcached-molecule-operator role; the test makes the checks
of its molecule test on the operator's /metrics (the same 12 strings), under both executors, then tries
the receiver as any local process could and sees it refuse without harm.
"""

from __future__ import annotations

import re
import socket
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.helpers import missing_upstream_metrics
from tests.integration.conftest import FIXTURES, Objects, OperatorProcess

pytestmark = pytest.mark.integration
GROUP, VERSION, PLURAL = "test.hybrid-operator.dev", "v1", "opens"
WATCHES = FIXTURES / "projects" / "metrics" / "watches.yaml"
GVK = "Open.v1.test.hybrid-operator.dev"


def values(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def receiver_url(op: OperatorProcess) -> str:
    match = re.search(r"receiving role metrics on (http://\S+)", op.log())
    assert match, op.log()
    return match.group(1)


def post(url: str, data: bytes, method: str = "POST") -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def converge(op: OperatorProcess, objects: Objects) -> dict[str, Any]:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Open", "metadata": {"name": "m"}}
    objects.create(GROUP, VERSION, PLURAL, body)

    return objects.wait_successful(GROUP, VERSION, PLURAL, "m", 120)


@pytest.mark.parametrize("executor", ["warm", "runner"])
def test_osdk_metric_values_appear_on_the_operators_metrics(operator, objects: Objects, executor: str) -> None:
    op = operator(WATCHES, "--executor", executor)
    obj = converge(op, objects)
    text = op.metrics_with(f'ansible_operator_reconcile_result_total{{GVK="{GVK}",result="succeeded"}}')
    assert not missing_upstream_metrics(text), text
    got = values(text)
    assert got[f'ansible_operator_reconcile_result_total{{GVK="{GVK}",result="succeeded"}}'] == 1  # one run
    assert got["sanity_counter"] == 0 and got["counter_inc_test"] == 1 and got["counter_add_test"] == 2
    assert got["gauge_set_test"] == 5 and got["gauge_add_test"] == 7 and got["gauge_sub_test"] == -7
    assert abs(got["gauge_time_test"] - time.time()) < 300
    assert got["histogram_test_sum"] == 2 and got['histogram_test_bucket{le="2.5"}'] == 1
    assert got["summary_test_sum"] == 2 and got["summary_test_count"] == 1
    assert "# TYPE counter_inc_test counter\n" in text and "counter_inc_test_total" not in text
    # The role saw the receiver's refusal of a type change as a failed task with the reason.
    assert obj["status"]["refused"] == "cannot change metric type of counter_inc_test, which is a counter"
    assert str(obj["status"]["refusedCode"]) == "400"


def test_the_receiver_refuses_hostile_requests_and_keeps_serving(operator, objects: Objects) -> None:
    op = operator(WATCHES)
    url = receiver_url(op)
    assert url.startswith("http://127.0.0.1:") and not url.endswith(":5050/metrics")
    # A local process that is not one of the operator's runs is not heard, whatever it sends: the
    # malformed, the reserved names, the huge, and a well-formed metric it would register first (another
    # user once did, under another type, and every run's osdk_metric failed after it).
    assert post(url, b"{not json")[0] == 401
    assert post(url, b'{"name": "ansible_operator_reconciles", "gauge": {"set": 1}}')[0] == 401
    assert post(url, b'{"name": "hybrid_operator_leader", "gauge": {"set": 0}}')[0] == 401
    assert post(url, b"[" * 30_000 + b"]" * 30_000)[0] == 401
    assert post(url, b'{"name": "counter_inc_test", "description": "squatted", "gauge": {"set": 9}}')[0] == 401
    assert post(url, b"", method="GET")[0] == 405
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:  # claims 1 GB, sends little
        sock.sendall(b"POST /metrics HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\n{}")
        assert sock.recv(100).startswith(b"HTTP/1.0 401")
    converge(op, objects)  # the role's own metrics go through, the squatted name as the counter it is
    text = op.metrics_with("ansible_operator_reconciles_bucket")  # the reconcile's end, after its status
    got = values(text)
    assert got["counter_inc_test"] == 1 and "# TYPE counter_inc_test counter\n" in text
    assert op.ready()
    assert "Traceback" not in op.log()
