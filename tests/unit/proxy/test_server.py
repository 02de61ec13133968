"""The run proxy against hostile local clients: every malformed request gets a status, never a traceback,
a hang, a foreign host or a thread held forever; tokens die with their run. The API server behind it is a
tiny local HTTP server that records what reaches it."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client as k8s_client

from hybrid_operator.kube.client import Kube
from hybrid_operator.kube.owners import Child, Owner
from hybrid_operator.proxy import accepting
from hybrid_operator.proxy.confining import Reach
from hybrid_operator.proxy.server import ApiProxy

OWNER = Owner("cache.example.com/v1alpha1", "Memcached", "m", "ns", "uid-1")


STORED = ["create", "delete", "get", "list", "patch", "update", "watch"]
# What the fake API server's discovery serves: group/version -> (kind, plural, namespaced, verbs)
DISCOVERY: dict[str, list[tuple[str, str, bool, list[str]]]] = {
    "/api/v1": [
        ("ConfigMap", "configmaps", True, STORED),
        ("Namespace", "namespaces", False, STORED),
        ("Binding", "bindings", True, ["create"]),
    ],
    "/apis/rbac.authorization.k8s.io/v1": [
        ("ClusterRole", "clusterroles", False, STORED),
        ("Role", "roles", True, STORED),
    ],
    "/apis/authorization.k8s.io/v1": [
        ("SelfSubjectAccessReview", "selfsubjectaccessreviews", False, ["create"]),
        ("SubjectAccessReview", "subjectaccessreviews", False, ["create"]),
        ("LocalSubjectAccessReview", "localsubjectaccessreviews", True, ["create"]),
        ("SelfSubjectRulesReview", "selfsubjectrulesreviews", False, ["create"]),
    ],
    "/apis/authentication.k8s.io/v1": [
        ("TokenReview", "tokenreviews", False, ["create"]),
        ("SelfSubjectReview", "selfsubjectreviews", False, ["create"]),
    ],
}


def discovery_document(path: str) -> dict[str, object] | None:
    kinds = DISCOVERY.get(path)
    if kinds is None:
        return None
    return {
        "kind": "APIResourceList",
        "groupVersion": path.removeprefix("/apis/").removeprefix("/api/"),
        "resources": [
            {"name": plural, "kind": kind, "namespaced": namespaced, "verbs": verbs}
            for kind, plural, namespaced, verbs in kinds
        ],
    }


class Upstream:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bytes]] = []
        self.discovery_status = 200  # what discovery requests get (500: the API server cannot say)
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                document = discovery_document(self.path) if self.command == "GET" else None
                if document is not None:
                    data = json.dumps(document).encode()
                    self.send_response(upstream.discovery_status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                upstream.seen.append((self.command, self.path, body))
                data = json.dumps({"kind": "Status", "path": self.path}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def proxy(upstream: Upstream) -> Iterator[ApiProxy]:
    config = k8s_client.Configuration()
    config.host = upstream.host
    p = ApiProxy(
        Kube(k8s_client.ApiClient(config)),
        inject=True,
        on_child=lambda c: None,
        max_connections=4,
        socket_timeout=1.0,
        head_deadline=1.0,
    )
    p.start()
    yield p
    p.stop()


def token(proxy: ApiProxy, run_id: str = "run1") -> str:
    return str(json.loads(proxy.kubeconfig_for(OWNER, run_id))["users"][0]["user"]["token"])


def raw(proxy: ApiProxy, data: bytes, wait: float = 5.0) -> bytes:
    port = int(proxy.address.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(data)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
    return b"".join(chunks)


def req(proxy: ApiProxy, method: str = "GET", target: str = "/api/v1/pods", headers: str = "") -> bytes:
    """A request with a valid run token (and whatever else the test adds)."""
    return f"{method} {target} HTTP/1.1\r\nAuthorization: Bearer {token(proxy)}\r\n{headers}\r\n".encode("latin-1")


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0


def test_a_run_token_reaches_the_api_server(proxy: ApiProxy, upstream: Upstream) -> None:
    answer = raw(
        proxy, f"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token(proxy)}\r\n\r\n".encode()
    )
    assert status_of(answer) == 200
    assert upstream.seen[-1][:2] == ("GET", "/api/v1/namespaces")


def test_a_double_slash_target_stays_on_the_api_server(proxy: ApiProxy, upstream: Upstream) -> None:
    assert status_of(raw(proxy, req(proxy, target="//evil.example/api"))) in (200, 400)
    assert all(path.startswith("/") and not path.startswith("//") for _, path, _ in upstream.seen)


def test_a_finished_runs_token_stops_working(proxy: ApiProxy, upstream: Upstream) -> None:
    good = token(proxy, "done")
    proxy.revoke("done")
    answer = raw(proxy, f"GET /api/v1/namespaces HTTP/1.1\r\nAuthorization: Bearer {good}\r\n\r\n".encode())
    assert status_of(answer) == 401
    assert upstream.seen == []


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /api/v1/pods HTTP/1.1\r\nAuthorization: Bearer \xff\xfe\xc3\xa9\r\n\r\n", 401),  # non-ASCII, no creds
        (b"GET /api/v1/pods HTTP/1.1\r\nAuthorization: Basic YWRtaW46YWRtaW4=\r\n\r\n", 401),
        (b"GET /api/v1/pods HTTP/1.1\r\nAuthorization: Bearer forged-token-0123456789\r\n\r\n", 401),
        (b"GET /api/v1/pods HTTP/1.1\r\n\r\n", 401),
    ],
)
def test_forged_credentials_get_401(proxy: ApiProxy, upstream: Upstream, request_bytes: bytes, status: int) -> None:
    assert status_of(raw(proxy, request_bytes)) == status
    assert upstream.seen == []


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("@evil.example:80/api/v1/pods", 400),
        ("http://evil.example/api/v1/pods", 400),
        ("*", 400),
        ("/api/v1/pods\x7f", 400),
    ],
)
def test_only_origin_form_targets_with_a_valid_token(
    proxy: ApiProxy, upstream: Upstream, target: str, status: int
) -> None:
    answer = raw(proxy, f"GET {target} HTTP/1.1\r\nAuthorization: Bearer {token(proxy)}\r\n\r\n".encode("latin-1"))
    assert status_of(answer) == status
    assert upstream.seen == []


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ("Content-Length: abc\r\n", 400),
        ("Content-Length: -1\r\n", 400),
        ("Content-Length: 99999999999\r\n", 400),
        ("Content-Length: 20000000\r\n", 413),
        ("Content-Length: 2\r\nContent-Length: 3\r\n", 400),
        ("Transfer-Encoding: chunked\r\n", 411),
    ],
)
def test_malformed_bodies_get_a_status_never_a_hang(
    proxy: ApiProxy, upstream: Upstream, headers: str, status: int
) -> None:
    head = f"POST /api/v1/namespaces/ns/configmaps HTTP/1.1\r\nAuthorization: Bearer {token(proxy)}\r\n{headers}\r\n"
    assert status_of(raw(proxy, head.encode() + b"{}")) == status
    assert upstream.seen == []


def test_a_short_body_is_refused_after_the_socket_timeout(proxy: ApiProxy, upstream: Upstream) -> None:
    head = req(proxy, "POST", "/api/v1/namespaces/ns/configmaps", "Content-Length: 100\r\n")
    answer = raw(proxy, head + b"{}", wait=5)
    assert status_of(answer) in (0, 400)  # closed by the timeout, or told so
    assert upstream.seen == []


def test_silent_connections_never_take_a_runs_slot(proxy: ApiProxy) -> None:
    port = int(proxy.address.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]  # as many as the runs' slots
    try:
        assert status_of(raw(proxy, b"GET /api/v1/pods HTTP/1.1\r\n\r\n", wait=2)) == 401  # no slot held: answered
        assert status_of(raw(proxy, req(proxy))) == 200
        for sock in idle:  # past the head's deadline (1 s here) they are closed
            sock.settimeout(5)
            assert sock.recv(100) == b""
    finally:
        for sock in idle:
            sock.close()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_target_parser_accepts_only_paths(text: str) -> None:
    try:
        got = accepting.target(text)
    except accepting.BadRequest as exc:
        assert exc.status == 400
        return
    assert got.startswith("/") and not got.startswith("//") and got.isascii() and "@" not in got.split("?")[0][:1]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["Content-Length", "Transfer-Encoding", "X"]), st.text(max_size=30)), max_size=3)
)
def test_length_parser_raises_only_bad_request(pairs: list[tuple[str, str]]) -> None:
    message = Message()
    for key, value in pairs:
        message[key] = value
    try:
        length = accepting.content_length(message)
    except accepting.BadRequest as exc:
        assert exc.status in (400, 411, 413)
        return
    assert 0 <= length <= accepting.MAX_BODY


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=200)))
def test_token_parser_never_raises(header: str | None) -> None:
    got = accepting.bearer_token(header)
    assert got is None or (got.isascii() and 16 <= len(got) <= 128)


def test_http_client_requests_pass(proxy: ApiProxy, upstream: Upstream) -> None:
    port = int(proxy.address.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    conn.request(
        "POST", "/api/v1/namespaces/ns/configmaps", body=body, headers={"Authorization": f"Bearer {token(proxy)}"}
    )
    assert conn.getresponse().status == 200
    sent = json.loads(upstream.seen[-1][2])
    assert sent["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


@pytest.fixture
def recording(upstream: Upstream) -> Iterator[tuple[ApiProxy, list[Child]]]:
    """A proxy that keeps the children it reports."""
    config = k8s_client.Configuration()
    config.host = upstream.host
    children: list[Child] = []
    p = ApiProxy(Kube(k8s_client.ApiClient(config)), inject=True, on_child=children.append)
    p.start()
    yield p, children
    p.stop()


def create(proxy: ApiProxy, path: str, obj: dict[str, object]) -> int:
    port = int(proxy.address.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("POST", path, body=json.dumps(obj), headers={"Authorization": f"Bearer {token(proxy)}"})
    return conn.getresponse().status


REVIEWS = [
    ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "authorization.k8s.io/v1", "SelfSubjectAccessReview"),
    ("/apis/authorization.k8s.io/v1/subjectaccessreviews", "authorization.k8s.io/v1", "SubjectAccessReview"),
    (
        "/apis/authorization.k8s.io/v1/namespaces/ns/localsubjectaccessreviews",
        "authorization.k8s.io/v1",
        "LocalSubjectAccessReview",
    ),
    ("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", "authorization.k8s.io/v1", "SelfSubjectRulesReview"),
    ("/apis/authentication.k8s.io/v1/tokenreviews", "authentication.k8s.io/v1", "TokenReview"),
    ("/apis/authentication.k8s.io/v1/selfsubjectreviews", "authentication.k8s.io/v1", "SelfSubjectReview"),
    ("/api/v1/namespaces/ns/bindings", "v1", "Binding"),
]


@pytest.mark.parametrize(("path", "api_version", "kind"), REVIEWS, ids=[k for _, _, k in REVIEWS])
def test_kinds_that_are_never_stored_reach_the_api_server_untouched(
    recording: tuple[ApiProxy, list[Child]], upstream: Upstream, path: str, api_version: str, kind: str
) -> None:
    """The API server refuses metadata on a review (422 "metadata ... must be empty"), and none can be
    watched: as upstream's virtual kinds (no get, list and watch), no owner and no dependent watch."""
    proxy, children = recording
    review = {"apiVersion": api_version, "kind": kind, "spec": {"resourceAttributes": {"verb": "get"}}}
    assert create(proxy, path, review) == 200
    assert upstream.seen[-1][:2] == ("POST", path)
    assert json.loads(upstream.seen[-1][2]) == review
    assert children == []


def test_a_cluster_scoped_child_of_a_namespaced_owner_gets_annotations_not_an_owner_reference(
    recording: tuple[ApiProxy, list[Child]], upstream: Upstream
) -> None:
    """kubernetes.core.k8s sends the task's namespace in the body of a ClusterRole too; the child is still
    cluster-scoped, and a namespaced owner is invalid for it (OwnerRefInvalidNamespace)."""
    proxy, children = recording
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "r", "namespace": "ns"},
    }
    assert create(proxy, "/apis/rbac.authorization.k8s.io/v1/clusterroles", role) == 200
    meta = json.loads(upstream.seen[-1][2])["metadata"]
    assert "ownerReferences" not in meta
    assert meta["annotations"] == {
        "operator-sdk/primary-resource": "ns/m",
        "operator-sdk/primary-resource-type": "Memcached.cache.example.com",
    }
    assert children == [Child("rbac.authorization.k8s.io/v1", "ClusterRole", False, False, OWNER)]


@pytest.mark.parametrize(
    ("namespace", "owned"), [("ns", True), ("elsewhere", False)], ids=["owners-namespace", "another-namespace"]
)
def test_a_namespaced_child_is_owned_only_in_its_owners_namespace(
    recording: tuple[ApiProxy, list[Child]], upstream: Upstream, namespace: str, owned: bool
) -> None:
    proxy, children = recording
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}}
    assert create(proxy, f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", role) == 200
    meta = json.loads(upstream.seen[-1][2])["metadata"]
    assert ("ownerReferences" in meta) is owned
    assert ("annotations" in meta) is not owned
    assert children == [Child("rbac.authorization.k8s.io/v1", "Role", True, owned, OWNER)]


def test_a_kind_discovery_cannot_answer_for_is_not_created(
    recording: tuple[ApiProxy, list[Child]], upstream: Upstream
) -> None:
    """Upstream answers 500 when it cannot tell a virtual kind: created unowned, a child would be lost."""
    proxy, children = recording
    upstream.discovery_status = 500
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert create(proxy, "/api/v1/namespaces/ns/configmaps", cm) == 503
    assert upstream.seen == []
    assert children == []


def test_a_kind_the_api_server_does_not_serve_is_left_to_it(
    recording: tuple[ApiProxy, list[Child]], upstream: Upstream
) -> None:
    proxy, children = recording
    thing = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}}
    assert create(proxy, "/apis/example.com/v1/namespaces/ns/things", thing) == 200
    assert json.loads(upstream.seen[-1][2]) == thing
    assert children == []


# -- where a run may go (--run-namespaces) --------------------------------------------------------------


def bearer(method: str, target: str, token: str) -> bytes:
    return f"{method} {target} HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode("latin-1")


def confined_token(proxy: ApiProxy, *namespaces: str, run_id: str = "confined") -> str:
    config = proxy.kubeconfig_for(OWNER, run_id, Reach(frozenset(namespaces)))
    return str(json.loads(config)["users"][0]["user"]["token"])


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/namespaces/other/configmaps/x",
        "/api/v1/configmaps",  # every namespace's, at once
        "/api/v1/namespaces/other",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/other/roles?watch=true",
    ],
)
def test_a_confined_run_is_refused_outside_its_namespaces_with_a_status(
    proxy: ApiProxy, upstream: Upstream, target: str
) -> None:
    answer = raw(proxy, bearer("GET", target, confined_token(proxy, "ns")))
    assert status_of(answer) == 403
    status = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert status["kind"] == "Status" and status["reason"] == "Forbidden" and "may reach ns" in status["message"]
    assert upstream.seen == []  # nothing reached the API server


def test_a_confined_run_reaches_its_namespace_and_cluster_scoped_kinds(proxy: ApiProxy, upstream: Upstream) -> None:
    token = confined_token(proxy, "ns")
    for target in ("/api/v1/namespaces/ns/configmaps/x", "/apis/rbac.authorization.k8s.io/v1/clusterroles"):
        assert status_of(raw(proxy, bearer("GET", target, token))) == 200
    assert [path for _, path, _ in upstream.seen] == [
        "/api/v1/namespaces/ns/configmaps/x",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    ]


def test_a_path_with_a_dot_segment_is_refused_for_every_run(proxy: ApiProxy, upstream: Upstream) -> None:
    answer = raw(proxy, req(proxy, "GET", "/api/v1/namespaces/ns/configmaps/../../other/secrets/x"))
    assert status_of(answer) == 400
    assert upstream.seen == []
