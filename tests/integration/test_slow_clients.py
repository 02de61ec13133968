"""Slow clients on the real operator (issue 22): the attack that made new runs get 503, replayed against a
running operator. 64 connections trickle one byte a second into the runs' API proxy, for as long as a Foo
takes to converge, while its role reads and writes through that proxy; the probes and the role-metrics
receiver are trickled into as well. The Foo must converge, /readyz answer, and the log carry no traceback."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.integration.conftest import Objects, successful, wait_until
from tests.trickling import Tricklers

pytestmark = pytest.mark.integration
G, V, P = "samplecontroller.k8s.io", "v1alpha1", "foos"


def port_in_log(log: str, pattern: str) -> int:
    match = re.search(pattern, log)
    assert match, f"{pattern!r} not in the operator's log:\n{log[-4000:]}"
    return int(match.group(1))


def test_a_foo_converges_while_64_connections_trickle_into_the_proxy(
    operator, objects: Objects, foo_watches: Path
) -> None:
    running = operator(foo_watches, "--zap-log-level", "debug")
    proxy = port_in_log(running.log(), r"API proxy for runs listening on http://127\.0\.0\.1:(\d+)")
    receiver = port_in_log(running.log(), r"receiving role metrics on http://127\.0\.0\.1:(\d+)/metrics")
    with (
        Tricklers(proxy, 64, limit=180) as at_proxy,
        Tricklers(running.health_port, 32, limit=180),
        Tricklers(receiver, 16, head=b"POST /metrics HTTP/1.1\r\nContent-Length: 100\r\n\r\n{", limit=180),
    ):
        time.sleep(2)  # all of them connected and trickling before the Foo exists
        started = time.monotonic()
        objects.create(
            G,
            V,
            P,
            {
                "apiVersion": f"{G}/{V}",
                "kind": "Foo",
                "metadata": {"name": "held"},
                "spec": {"deploymentName": "held-web", "replicas": 1},
            },
        )

        def converged() -> bool:
            obj = objects.get(G, V, P, "held")
            return successful(obj) and ((obj or {}).get("status") or {}).get("availableReplicas") == 1

        wait_until(converged, 120, "the Foo converged while the proxy is trickled into")
        took = time.monotonic() - started
        assert running.ready()  # /readyz still answers through its own trickle
        assert at_proxy.opened > 64  # the trickle went on: its connections were closed and opened again
    print(f"\nFoo converged {took:.1f} s after creation, 64 connections trickling into the proxy")
    log = running.log()
    assert "Traceback" not in log, log[-4000:]
    assert "code 503" not in log  # no run was turned away (each refusal is a debug line)
    # The trickles were cut quietly: 64 of them overflow the proxy's pending pool of 32, so the oldest
    # made room for the newest (and a run's request) again and again.
    assert "API proxy: too many connections wait for their request head; closed the oldest" in log
