"""The cache-or-forward decision of the run proxy: only plain reads of a synced, unfiltered informer's
namespace are answered from memory; odd paths and queries are forwarded; a run's own writes are not."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.kube.client import Kube, Resource
from hybrid_operator.kube.objects import GVK
from hybrid_operator.kube.watching import Informer
from hybrid_operator.proxy import cachereads
from hybrid_operator.proxy.cachereads import Caches, Location, RunWrites, cacheable, locate

DEPLOYMENTS = Resource(GVK("apps", "v1", "Deployment"), "deployments", True)
NODES = Resource(GVK("", "v1", "Node"), "nodes", False)
DEP_PATH = "/apis/apps/v1/namespaces/ns/deployments"


def informer(resource: Resource, namespace: str = "", selector: str = "", synced: bool = True) -> Informer:
    inf = Informer(Kube.__new__(Kube), resource, lambda *a: None, namespace=namespace, label_selector=selector)
    if synced:
        inf.synced.set()
    return inf


def put(inf: Informer, namespace: str, name: str, rv: str = "7") -> dict[str, Any]:
    meta = {"name": name, "resourceVersion": rv, **({"namespace": namespace} if namespace else {})}
    obj = {"apiVersion": inf.resource.gvk.api_version, "kind": inf.resource.gvk.kind, "metadata": meta}
    inf._apply("ADDED", obj)
    return obj


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (f"{DEP_PATH}/web", Location("/apis/apps/v1/deployments", "ns", "web")),
        (DEP_PATH, Location("/apis/apps/v1/deployments", "ns", "")),
        (f"{DEP_PATH}/web?labelSelector=&fieldSelector=", Location("/apis/apps/v1/deployments", "ns", "web")),
        ("/api/v1/nodes/n1", Location("/api/v1/nodes", "", "n1")),
        ("/api/v1/namespaces/ns", Location("/api/v1/namespaces", "", "ns")),
    ],
)
def test_plain_reads_are_cacheable(target: str, expected: Location) -> None:
    assert cacheable(target, "application/json") == expected


@pytest.mark.parametrize(
    "target",
    [
        f"{DEP_PATH}/web?resourceVersion=0&watch=1",
        f"{DEP_PATH}?watch=true",
        f"{DEP_PATH}?limit=500",
        f"{DEP_PATH}?labelSelector=app%3Dweb",
        f"{DEP_PATH}/web?resourceVersion=0",
        f"{DEP_PATH}/web/status",  # a subresource
        f"{DEP_PATH}/web/scale",
        f"{DEP_PATH}/..",
        f"{DEP_PATH}/../../kube-system/deployments/x",
        "/apis/apps/v1/namespaces/../deployments/x",
        f"{DEP_PATH}/a%2Fb",  # an encoded slash
        f"{DEP_PATH}/%2e%2e",
        f"{DEP_PATH}/",  # a trailing slash
        "/apis/apps/v1/namespaces//deployments/x",
        f"{DEP_PATH}/{'a' * 300}",  # longer than any name
        f"/apis/apps/v1/namespaces/{'n' * 70}/deployments/x",
        f"{DEP_PATH}/web/status/extra",
        "/apis/apps",
        "/api",
        "/version",
        "/apis/Apps/v1/deployments",
        f"{DEP_PATH}/web?{'&'.join(['labelSelector='] * 20)}",  # more fields than any client sends
        f"{DEP_PATH}/{'x' * 5000}",
    ],
)
def test_odd_reads_are_forwarded(target: str) -> None:
    assert cacheable(target, "application/json") is None


@pytest.mark.parametrize(
    "accept",
    [
        "application/vnd.kubernetes.protobuf",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        "application/vnd.kubernetes.protobuf,application/json",
        "text/html",
    ],
)
def test_answers_only_json_as_it_is(accept: str) -> None:
    assert cacheable(f"{DEP_PATH}/web", accept) is None
    assert cacheable(f"{DEP_PATH}/web", None) is not None
    assert cacheable(f"{DEP_PATH}/web", "*/*") is not None


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=300), st.one_of(st.none(), st.text(max_size=50)))
def test_the_decision_never_raises(target: str, accept: str | None) -> None:
    got = cacheable(target, accept)
    segments = target.split("?")[0].split("/")
    assert got is None or (got.key.startswith("/api") and not got.sub and not {"..", "."} & set(segments))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["..", ".", "", "%2F", "a", "ns", "namespaces", "apps", "v1", "x" * 260]), max_size=8))
def test_locate_never_crosses_segments(parts: list[str]) -> None:
    location = locate("/apis/apps/v1/" + "/".join(parts))
    if location is not None:
        assert all(p not in ("..", ".", "") and "%" not in p for p in (location.namespace or "x", location.name or "x"))


def test_a_synced_informer_answers_a_get_as_the_api_server() -> None:
    caches, inf = Caches(), informer(DEPLOYMENTS)
    caches.add(inf)
    obj = put(inf, "ns", "web")
    answer = caches.answer(Location("/apis/apps/v1/deployments", "ns", "web"))
    assert answer is not None and answer.status == 200 and json.loads(answer.body) == obj


def test_a_missing_object_is_the_api_servers_not_found() -> None:
    caches, inf = Caches(), informer(DEPLOYMENTS, namespace="ns")
    caches.add(inf)
    answer = caches.answer(Location("/apis/apps/v1/deployments", "ns", "gone"))
    assert answer is not None and answer.status == 404
    status = json.loads(answer.body)
    assert status["reason"] == "NotFound" and status["code"] == 404
    assert status["message"] == 'deployments.apps "gone" not found'
    assert status["details"] == {"name": "gone", "group": "apps", "kind": "deployments"}


def test_a_list_is_a_kind_list_of_the_namespace_with_the_stores_resource_version() -> None:
    caches, inf = Caches(), informer(DEPLOYMENTS)
    caches.add(inf)
    put(inf, "ns", "b", "5")
    put(inf, "other", "c", "6")
    put(inf, "ns", "a", "9")
    answer = caches.answer(Location("/apis/apps/v1/deployments", "ns", ""))
    assert answer is not None
    listing = json.loads(answer.body)
    assert listing["kind"] == "DeploymentList" and listing["apiVersion"] == "apps/v1"
    assert listing["metadata"] == {"resourceVersion": "9"}
    assert [i["metadata"]["name"] for i in listing["items"]] == ["a", "b"]
    everywhere = caches.answer(Location("/apis/apps/v1/deployments", "", ""))
    assert everywhere is not None and len(json.loads(everywhere.body)["items"]) == 3


def test_an_informer_that_keeps_only_metadata_never_answers() -> None:
    caches = Caches()
    inf = Informer(
        Kube.__new__(Kube), DEPLOYMENTS, lambda *a: None, keep=lambda obj: {"metadata": obj["metadata"]}, full=False
    )
    inf.synced.set()
    caches.add(inf)
    put(inf, "ns", "web")
    assert caches.answer(Location("/apis/apps/v1/deployments", "ns", "web")) is None
    assert caches.answer(Location("/apis/apps/v1/deployments", "ns", "")) is None


def test_an_object_too_deep_to_encode_is_left_to_the_api_server() -> None:
    caches, inf = Caches(), informer(DEPLOYMENTS)
    caches.add(inf)
    obj = put(inf, "ns", "web")
    node = obj.setdefault("spec", {})
    for _ in range(20_000):
        node["a"] = {}
        node = node["a"]
    inf._apply("MODIFIED", obj)
    assert caches.answer(Location("/apis/apps/v1/deployments", "ns", "web")) is None
    assert caches.answer(Location("/apis/apps/v1/deployments", "ns", "")) is None


def test_cluster_scoped_kinds_are_answered_without_a_namespace_only() -> None:
    caches, inf = Caches(), informer(NODES)
    caches.add(inf)
    put(inf, "", "n1")
    answer = caches.answer(Location("/api/v1/nodes", "", "n1"))
    assert answer is not None and answer.status == 200
    assert caches.answer(Location("/api/v1/nodes", "ns", "n1")) is None


@pytest.mark.parametrize(
    ("inf", "location"),
    [
        (informer(DEPLOYMENTS, synced=False), Location("/apis/apps/v1/deployments", "ns", "web")),
        (informer(DEPLOYMENTS, selector="app=web"), Location("/apis/apps/v1/deployments", "ns", "web")),
        (informer(DEPLOYMENTS, namespace="other"), Location("/apis/apps/v1/deployments", "ns", "web")),
        (informer(DEPLOYMENTS, namespace="ns"), Location("/apis/apps/v1/deployments", "", "")),  # all namespaces
        (informer(DEPLOYMENTS), Location("/apis/apps/v1/deployments", "", "web")),  # no namespace
        (informer(DEPLOYMENTS), Location("/apis/apps/v1/statefulsets", "ns", "web")),
        (informer(DEPLOYMENTS), Location("/apis/apps/v2/deployments", "ns", "web")),
    ],
)
def test_when_unsure_the_cache_does_not_answer(inf: Informer, location: Location) -> None:
    caches = Caches()
    caches.add(inf)
    put(inf, "ns", "web")
    assert caches.answer(location) is None


def test_a_failing_informer_does_not_answer() -> None:
    caches, inf = Caches(), informer(DEPLOYMENTS)
    caches.add(inf)
    for _ in range(3):
        inf._failed("connection refused")
    assert caches.answer(Location("/apis/apps/v1/deployments", "ns", "web")) is None


def test_a_runs_writes_send_its_reads_of_them_to_the_api_server() -> None:
    writes = RunWrites()
    web = Location("/apis/apps/v1/deployments", "ns", "web")
    listing = Location("/apis/apps/v1/deployments", "ns", "")
    assert not writes.touched(web) and not writes.touched(listing)
    writes.note(f"{DEP_PATH}/web")
    assert writes.touched(web) and writes.touched(listing)
    assert writes.touched(Location("/apis/apps/v1/deployments", "", ""))  # a list of all namespaces
    assert not writes.touched(Location("/apis/apps/v1/deployments", "ns", "db"))
    assert not writes.touched(Location("/apis/apps/v1/deployments", "other", ""))


def test_a_create_names_its_object_or_stands_for_all() -> None:
    named, anonymous = RunWrites(), RunWrites()
    named.note(DEP_PATH, cachereads.created_name(b'{"metadata": {"name": "web"}}'))
    anonymous.note(DEP_PATH, cachereads.created_name(b'{"metadata": {"generateName": "web-"}}'))
    assert named.touched(Location("/apis/apps/v1/deployments", "ns", "web"))
    assert not named.touched(Location("/apis/apps/v1/deployments", "ns", "db"))
    assert anonymous.touched(Location("/apis/apps/v1/deployments", "ns", "db"))


def test_a_subresource_write_is_a_write_of_its_object() -> None:
    writes = RunWrites()
    writes.note(f"{DEP_PATH}/web/scale")
    writes.note("/api/v1/namespaces/team/finalize")
    assert writes.touched(Location("/apis/apps/v1/deployments", "ns", "web"))
    assert writes.touched(Location("/api/v1/namespaces", "", "team"))


@pytest.mark.parametrize("path", ["/apis/apps/v1/namespaces/ns/deployments/..", "/what", "/apis/apps/v1/" + "x/" * 9])
def test_a_write_it_cannot_place_forwards_every_later_read(path: str) -> None:
    writes = RunWrites()
    writes.note(path)
    assert writes.touched(Location("/api/v1/nodes", "", "n1"))


def test_a_run_that_writes_too_much_forwards_every_read() -> None:
    writes = RunWrites(limit=2)
    for name in ("a", "b", "c"):
        writes.note(f"{DEP_PATH}/{name}")
    assert writes.touched(Location("/api/v1/nodes", "", "n1"))


@pytest.mark.parametrize("body", [None, b"", b"not json", b"[1]", b'{"metadata": 3}', b'{"metadata": {"name": 3}}'])
def test_created_name_of_odd_bodies_is_none(body: bytes | None) -> None:
    assert cachereads.created_name(body) is None


def test_the_store_and_its_resource_version_move_together() -> None:
    inf = informer(DEPLOYMENTS)
    put(inf, "ns", "a", "3")
    objects, rv = inf.snapshot()
    assert rv == "3" and [o["metadata"]["name"] for o in objects] == ["a"]
