"""The run proxy with --proxy-cache-reads: plain reads of a cached kind never reach the API server, other
reads and every write do, and a run's reads of what it wrote go to the API server for the rest of the run."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client

from hybrid_operator import metrics
from hybrid_operator.kube.client import Kube, Resource
from hybrid_operator.kube.objects import GVK
from hybrid_operator.kube.owners import Owner
from hybrid_operator.kube.watching import Informer
from hybrid_operator.proxy.cachereads import Caches
from hybrid_operator.proxy.server import ApiProxy
from tests.unit.proxy.test_server import Upstream, raw, status_of

OWNER = Owner("samplecontroller.k8s.io/v1alpha1", "Foo", "f", "ns", "uid-1")
DEPLOYMENTS = Resource(GVK("apps", "v1", "Deployment"), "deployments", True)
WEB = "/apis/apps/v1/namespaces/ns/deployments/web"
CACHED = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"}}


@pytest.fixture
def proxy(upstream: Upstream) -> Iterator[ApiProxy]:
    config = k8s_client.Configuration()
    config.host = upstream.host
    kube = Kube(k8s_client.ApiClient(config))
    informer = Informer(kube, DEPLOYMENTS, lambda *a: None, namespace="ns")
    informer._apply("ADDED", {**CACHED, "metadata": {**CACHED["metadata"], "resourceVersion": "4"}})
    informer.synced.set()
    caches = Caches()
    caches.add(informer)
    p = ApiProxy(kube, inject=True, on_child=lambda c: None, socket_timeout=2.0, caches=caches)
    p.start()
    yield p
    p.stop()


def send(proxy: ApiProxy, run: str, method: str, target: str, body: bytes = b"") -> tuple[int, bytes]:
    """One request of run ``run`` (its token made on first use)."""
    if run not in TOKENS:
        TOKENS[run] = json.loads(proxy.kubeconfig_for(OWNER, run))["users"][0]["user"]["token"]
    token = TOKENS[run]
    head = f"{method} {target} HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    answer = raw(proxy, head.encode() + body)
    return status_of(answer), answer.partition(b"\r\n\r\n")[2]


TOKENS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def fresh_tokens() -> None:
    TOKENS.clear()


def reads(source: str) -> float:
    return metrics.REGISTRY.get_sample_value("hybrid_operator_proxy_reads_total", {"source": source}) or 0.0


def test_a_get_of_a_cached_object_never_reaches_the_api_server(proxy: ApiProxy, upstream: Upstream) -> None:
    before = reads("cache")
    status, body = send(proxy, "r1", "GET", WEB)
    assert status == 200 and json.loads(body)["metadata"]["name"] == "web"
    status, body = send(proxy, "r1", "GET", "/apis/apps/v1/namespaces/ns/deployments/absent")
    assert status == 404 and json.loads(body)["reason"] == "NotFound"
    assert upstream.seen == []
    assert reads("cache") == before + 2


@pytest.mark.parametrize(
    "target",
    [
        f"{WEB}?resourceVersion=0&watch=1",
        f"{WEB}/status",
        "/apis/apps/v1/namespaces/ns/deployments/a~b",  # not a plain name: the API server's to answer
        "/apis/apps/v1/namespaces/other/deployments/web",  # a namespace no informer covers
        "/apis/apps/v1/namespaces/ns/statefulsets/web",
        "/apis/apps/v1/namespaces/ns/deployments?labelSelector=app%3Dweb",
        f"/apis/apps/v1/namespaces/ns/deployments/{'w' * 4000}",
    ],
)
def test_other_reads_reach_the_api_server(proxy: ApiProxy, upstream: Upstream, target: str) -> None:
    before = reads("api")
    status, _ = send(proxy, "r1", "GET", target)
    assert status == 200 and upstream.seen[-1][:2] == ("GET", target)
    assert reads("api") == before + (0 if "watch=" in target else 1)  # a watch is not a read


def test_an_escaped_slash_reaches_neither_the_cache_nor_the_api_server(proxy: ApiProxy, upstream: Upstream) -> None:
    status, _ = send(proxy, "r1", "GET", "/apis/apps/v1/namespaces/ns/deployments/a%2Fb")
    assert status == 400 and upstream.seen == []


@pytest.mark.parametrize(
    ("method", "target", "body"),
    [
        ("PATCH", WEB, b'{"spec": {"replicas": 2}}'),
        ("PUT", f"{WEB}/scale", b"{}"),
        ("DELETE", WEB, b""),
        ("POST", "/apis/apps/v1/namespaces/ns/deployments", b'{"kind": "Deployment", "metadata": {"name": "web"}}'),
    ],
)
def test_a_run_reads_its_own_writes_from_the_api_server(
    proxy: ApiProxy, upstream: Upstream, method: str, target: str, body: bytes
) -> None:
    assert send(proxy, "writer", "GET", WEB)[0] == 200 and upstream.seen == []
    send(proxy, "writer", method, target, body)
    assert upstream.seen[-1][0] == method
    send(proxy, "writer", "GET", WEB)
    assert upstream.seen[-1][:2] == ("GET", WEB)  # the writer: from the API server
    send(proxy, "writer", "GET", "/apis/apps/v1/namespaces/ns/deployments")
    assert upstream.seen[-1][:2] == ("GET", "/apis/apps/v1/namespaces/ns/deployments")
    seen = len(upstream.seen)
    assert send(proxy, "another-run", "GET", WEB)[0] == 200
    assert len(upstream.seen) == seen  # another run: from the cache


def test_a_runs_writes_are_forgotten_with_its_token(proxy: ApiProxy, upstream: Upstream) -> None:
    send(proxy, "done", "PATCH", WEB, b"{}")
    proxy.revoke("done")
    assert proxy._writes == {}
