"""Where a confined run's requests may go: its namespaces and cluster-scoped kinds, nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.proxy.accepting import BadRequest
from hybrid_operator.proxy.confining import ANYWHERE, Reach, check

NAMESPACED = {("", "v1", "secrets"), ("", "v1", "configmaps"), ("", "v1", "pods"), ("apps", "v1", "deployments")}
CLUSTER = {("", "v1", "nodes"), ("", "v1", "namespaces"), ("rbac.authorization.k8s.io", "v1", "clusterroles")}
A = Reach(frozenset({"a", "shared"}))


def scope(group: str, version: str, plural: str) -> bool | None:
    key = (group, version, plural)
    return True if key in NAMESPACED else False if key in CLUSTER else None


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/a/configmaps/app",
        "/api/v1/namespaces/a/secrets",
        "/api/v1/namespaces/shared/configmaps/x",  # the watch's runNamespaces
        "/apis/apps/v1/namespaces/a/deployments/web/status",
        "/api/v1/watch/namespaces/a/pods",
        "/api/v1/namespaces/a/pods/p/exec",
        "/api/v1/namespaces/a",  # its own namespace object
        "/api/v1/namespaces",  # the list of namespaces: a cluster-scoped kind
        "/api/v1/nodes/n1",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "/apis/example.com/v1/unknownthings",  # not in discovery: the API server answers (404)
        "/api/v1",
        "/apis/apps/v1",
        "/apis",
        "/version",
        "/openapi/v2",
    ],
)
def test_a_confined_run_reaches_its_namespaces_and_cluster_scoped_kinds(path: str) -> None:
    check(A, path, scope)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/b/secrets/db-creds",
        "/api/v1/namespaces/b/secrets",
        "/apis/apps/v1/namespaces/b/deployments",
        "/api/v1/watch/namespaces/b/pods",
        "/api/v1/namespaces/b",  # another namespace itself: read, changed or deleted
        "/api/v1/namespaces/b/status",
        "/api/v1/secrets",  # every namespace's Secrets at once
        "/api/v1/watch/secrets",
        "/apis/apps/v1/deployments",
    ],
)
def test_a_confined_run_is_refused_elsewhere_with_403(path: str) -> None:
    with pytest.raises(BadRequest) as refused:
        check(A, path, scope)
    assert refused.value.status == 403
    assert "a, shared" in refused.value.message


@pytest.mark.parametrize(
    "path",
    ["/api/v1/namespaces/a/configmaps/../../b/secrets/x", "/api/v1/namespaces/%2e%2e/b", "/api/v1/x%2Fy", "/a/./b"],
)
@pytest.mark.parametrize("reach", [A, ANYWHERE])
def test_a_path_that_is_not_plain_is_refused_whatever_the_reach(path: str, reach: Reach) -> None:
    with pytest.raises(BadRequest) as refused:
        check(reach, path, scope)
    assert refused.value.status == 400


def test_an_unconfined_run_goes_anywhere_as_upstreams_does() -> None:
    for path in ("/api/v1/namespaces/b/secrets/x", "/api/v1/secrets", "/api/v1/namespaces/b"):
        check(ANYWHERE, path, scope)


_SEGMENT = st.sampled_from(["a", "b", "shared", "namespaces", "watch", "api", "apis", "v1", "secrets", "nodes", ""])


@settings(max_examples=1000, deadline=None)
@given(st.lists(_SEGMENT, max_size=7))
def test_no_path_a_confined_run_may_send_names_another_namespace(segments: list[str]) -> None:
    path = "/" + "/".join(segments)
    try:
        check(A, path, scope)
    except BadRequest:
        return
    parts = path.rstrip("/").split("/")
    # Where the API server reads a namespace: /api/<v>/[watch/]namespaces/<ns>, /apis/<g>/<v>/[watch/]...
    at = {"api": 3, "apis": 4}.get(parts[1], 0) if len(parts) > 1 else 0
    if at and len(parts) > at and parts[at] == "watch":
        at += 1
    if at and len(parts) > at + 1 and parts[at] == "namespaces":
        assert parts[at + 1] in {"a", "shared"}, path
