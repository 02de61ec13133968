"""The API proxy a run talks to: owner references for what a role creates, and which kinds it touched.

Why a proxy: roles create children with stock modules (``kubernetes.core.k8s``) in separate processes;
the one place that sees every request, whatever module or language made it, is the wire. Like upstream,
each run gets a kubeconfig that points at this proxy; unlike upstream, the run's identity is a bearer
token that also carries a per-process secret, so no other local process can borrow the operator's
rights through it. For every create (POST) of a kind the API server stores (discovery lists get, list
and watch for it; the review kinds are not, as upstream's "virtual" kinds) the proxy adds an
ownerReference (controller) to the object when it lives in the owner's namespace, or operator-sdk's
``primary-resource`` annotations when it is cluster-scoped or elsewhere, then reports the child's kind so
the reactor can start a dependent watch.

Requests are forwarded with the operator's own credentials through the shared connection pool, and time out
after ``upstream_silence`` seconds without a byte from the API server. Long-lived ones are ``streaming``':
watches and followed logs are relayed chunk by chunk with no silence timeout, exec, attach and port-forward
are upgraded and relayed both ways by ``upgrading``; a run holds a few at once, each for a bounded
time, and all of them end with the run. With ``caches`` (``--proxy-cache-reads``), a GET the operator's
informers can answer is answered from memory instead (``cachereads`` decides, including
read-your-own-writes). Built by ``reactor.wiring``, started and stopped by the lifecycle with the other
servers; runs learn its address from the kubeconfig the reconciler writes for them.

Any local process can connect, so the server is a ``httpbounds.BoundedServer``: a request head must be
complete within 5 s; connections still sending theirs, or showing no run's token, stay in a pending pool
of 32 (the oldest closed to make room) and never take one of the runs' 64 slots, which a request takes
only after its token checked out (at most half of them for one run).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler

import urllib3

from hybrid_operator import httpbounds, metrics
from hybrid_operator.kube.client import ApiError, Kube
from hybrid_operator.kube.objects import GVK
from hybrid_operator.kube.owners import Child, ChildHandler, Owner, inject_owner, owned_by_kind
from hybrid_operator.proxy import accepting, cachereads, confining, streaming, upgrading

log = logging.getLogger(__name__)

_COLLECTION = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)/?$"
)
_OBJECT = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)(?P<namespaced>/namespaces/(?P<ns>[^/]+))?/[^/]+/[^/]+/?$")
_MAX_INSPECTED = 4 << 20  # bytes of a read object the proxy looks into for its owner


class ApiProxy:
    """The runs' way to the API server: authenticated per run, owner references added, children reported."""

    def __init__(
        self,
        kube: Kube,
        *,
        inject: bool,
        on_child: ChildHandler,
        max_connections: int = 64,
        socket_timeout: float = 60.0,
        caches: cachereads.Caches | None = None,
        max_pending: int = 32,
        head_deadline: float = 5.0,
        upstream_silence: float = 30.0,
        max_streams_per_run: int = 8,
        max_stream_seconds: float = 120.0,
    ) -> None:
        self.kube = kube
        self.inject = inject
        self.on_child = on_child
        # Slots are the runs': taken only once a request has shown a run's token, and no run may take more
        # than half. Every client is on loopback, so the per-address cap is the pending pool itself.
        self.bounds = httpbounds.Bounds(
            max_connections=max_connections,
            max_served_per_key=max(1, max_connections // 2),
            max_pending=max_pending,
            max_pending_per_address=max_pending,
            head_deadline=head_deadline,
        )
        self.socket_timeout = socket_timeout
        self.upstream_silence = upstream_silence  # seconds a plain request's answer may pause
        self.streams = streaming.Streams(
            lambda token: self._owner_of(token) is not None,
            max_per_run=max_streams_per_run,
            max_seconds=max_stream_seconds,
        )
        self.upgrades = upgrading.Upgrades(kube, self.streams, silence=upstream_silence)
        self._grants: dict[str, Owner] = {}  # token -> owner, for runs in progress only
        self._reach: dict[str, confining.Reach] = {}  # token -> where that run's requests may go
        self._runs: dict[str, str] = {}  # run id -> token
        self.caches = caches
        self._writes: dict[str, cachereads.RunWrites] = {}  # token -> what that run wrote (with caches)
        self._lock = threading.Lock()
        self._server: httpbounds.BoundedServer | None = None

    @property
    def address(self) -> str:
        assert self._server is not None, "proxy not started"
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def kubeconfig_for(self, owner: Owner, run_id: str, reach: confining.Reach = confining.ANYWHERE) -> str:
        """The kubeconfig text of one run: this proxy, with a token that is good until ``revoke(run_id)``
        for requests within ``reach``."""
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._grants[token] = owner
            self._reach[token] = reach
            self._runs[run_id] = token
            if self.caches is not None:
                self._writes[token] = cachereads.RunWrites()
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "operator", "cluster": {"server": self.address}}],
                "users": [{"name": "run", "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "run",
                        "context": {"cluster": "operator", "user": "run", "namespace": owner.namespace},
                    }
                ],
                "current-context": "run",
            }
        )

    def revoke(self, run_id: str) -> None:
        """The run ended: its token stops working (a process it left behind gets 401 from now on), and its
        streams (exec, watches, followed logs) are cut."""
        with self._lock:
            token = self._runs.pop(run_id, None)
            if token is not None:
                self._grants.pop(token, None)
                self._reach.pop(token, None)
                self._writes.pop(token, None)
        if token is not None and self.streams.close_run(token):
            log.debug("cut the streams of run %s, which ended", run_id)

    def _confine(self, token: str, path: str) -> None:
        """``accepting.BadRequest`` unless the run of ``token`` may send a request for ``path``."""
        with self._lock:
            reach = self._reach.get(token, confining.ANYWHERE)
        try:
            confining.check(reach, path, self.kube.namespaced)
        except ApiError as exc:
            raise accepting.BadRequest(503, f"cannot tell whether {path} is namespaced: {exc}") from exc
        except accepting.BadRequest as exc:
            log.warning("refused a run's request for %s: %s", path[:300], exc.message)
            raise

    def _owner_of(self, token: str) -> Owner | None:
        with self._lock:
            return self._grants.get(token)

    def _owner(self, authorization: str | None) -> tuple[Owner | None, cachereads.RunWrites | None, str]:
        """The run's owner (None: not a run's token), with caches what the run wrote, and the token."""
        token = accepting.bearer_token(authorization)
        if token is None:
            return None, None, ""
        with self._lock:
            return self._grants.get(token), self._writes.get(token), token

    def start(self) -> None:
        proxy = self

        class Handler(httpbounds.BoundedHandler):
            timeout = proxy.socket_timeout  # each read and write after the head: a silent run ends too
            admit_after_head = False  # a slot only for a run's token: see _handle

            def _handle(self) -> None:
                try:
                    path = accepting.target(self.path)
                    owner, writes, token = proxy._owner(self.headers.get("Authorization"))
                    if owner is None:
                        raise accepting.BadRequest(401, "this proxy serves the operator's own Ansible runs only")
                    length = accepting.content_length(self.headers)
                except accepting.BadRequest as exc:
                    self.close_connection = True
                    self.send_error(exc.status, exc.message)
                    return
                # Only now does the request count against the runs' slots (503 past them): connections
                # that never finish their head, or show no token, stay in the pending pool and its bounds.
                if not self.admit(token):
                    return
                try:  # where the run may go: before a cache, an upgrade or the API server sees the request
                    proxy._confine(token, path.partition("?")[0])
                except accepting.BadRequest as exc:
                    accepting.send_status(self, exc)
                    return
                upgrade = streaming.upgrade_of(path.partition("?")[0], self.headers)
                if upgrade is not None:
                    proxy.upgrades.relay(self, token, path, upgrade)
                    return
                body = self.rfile.read(length) if length else None
                if body is not None and len(body) != length:
                    self.close_connection = True
                    self.send_error(400, "the body ended before Content-Length")
                    return
                if writes is not None and proxy._answered_from_cache(self, writes, path, body):
                    return
                proxy._forward(self, owner, token, path, body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

        self._server = httpbounds.BoundedServer(("127.0.0.1", 0), Handler, self.bounds, "API proxy")
        self._server.start()
        log.info("API proxy for runs listening on %s", self.address)

    def stop(self, deadline: float | None = None) -> bool:
        """End the runs' streams and stop serving (a ``lifecycle.Runnable``, as ``start`` and ``ready``)."""
        self.streams.stop()
        if self._server is not None:
            self._server.stop()
        return True

    def ready(self) -> tuple[bool, str]:
        return self._server.ready() if self._server is not None else (False, "API proxy not started")

    def _answered_from_cache(
        self, handler: BaseHTTPRequestHandler, writes: cachereads.RunWrites, target: str, body: bytes | None
    ) -> bool:
        """Answer a GET from an informer's cache if it may be (True), else note a write and say False."""
        if handler.command in ("POST", "PUT", "PATCH", "DELETE"):
            writes.note(target.partition("?")[0], cachereads.created_name(body) if handler.command == "POST" else None)
            return False
        location = cachereads.cacheable(target, handler.headers.get("Accept"))
        if handler.command != "GET" or location is None or writes.touched(location) or self.caches is None:
            return False
        answer = self.caches.answer(location)
        if answer is None:
            return False
        metrics.PROXY_READS.labels("cache").inc()
        try:
            handler.send_response(answer.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(answer.body)))
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(answer.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the run hung up
        return True

    def _forward(
        self, handler: BaseHTTPRequestHandler, owner: Owner, token: str, target: str, body: bytes | None
    ) -> None:
        path, _, query = target.partition("?")
        streamed = streaming.streamed(handler.command, target)
        if handler.command == "GET" and not streamed:
            metrics.PROXY_READS.labels("api").inc()
        # A run that reads one object its owner's kind owns (kubernetes.core.k8s reads before it patches)
        # is how a restarted operator learns which children to watch again, as upstream's proxy does.
        read_one = handler.command == "GET" and not streamed and _OBJECT.match(path) is not None
        if handler.command == "POST" and body:
            try:
                body = self._on_create(path, owner, body)
            except accepting.BadRequest as exc:
                handler.send_error(exc.status, exc.message)
                return
        dropped = streaming.HOP_BY_HOP | {"authorization", "host"}
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in dropped}
        url_path = path + (f"?{query}" if query else "")
        auth: dict[str, str] = {}
        self.kube.api.update_params_for_auth(auth, [], ["BearerToken"], path, handler.command, body)
        headers.update(auth)
        if body is not None:
            headers["Content-Length"] = str(len(body))
        # A silent API server must not hold the run (and this thread): a plain answer may pause for
        # upstream_silence at most; a stream may be silent for good reason. Both have the streams' deadline
        # and end with their run (``streaming.Streams``), however slowly the answer trickles.
        try:
            with self.streams.open(token, counted=streamed) as stream:
                upstream = self.kube.api.rest_client.pool_manager.request(
                    handler.command,
                    self.kube.api.configuration.host + url_path,
                    body=body,
                    headers=headers,
                    preload_content=False,
                    timeout=urllib3.Timeout(connect=10, read=None if streamed else self.upstream_silence),
                    retries=False,
                    redirect=False,
                )
                # A cut (the deadline, the run's end) ends the API server's side; the run's then ends cleanly.
                self.streams.hold(stream, streaming.socket_of(upstream))
                keep = read_one and upstream.status == 200
                seen = streaming.relay(
                    handler, upstream, keep=keep, limit=_MAX_INSPECTED, stream=stream if streamed else None
                )
        except accepting.BadRequest as exc:
            handler.send_error(exc.status, exc.message)
            return
        except urllib3.exceptions.HTTPError as exc:
            handler.send_error(502, f"cannot reach the API server: {exc}")
            return
        if seen is not None:
            self._on_read(path, owner, seen)

    def _on_read(self, path: str, owner: Owner, body: bytes) -> None:
        """Report the kind of an object a run read when it belongs to the run's owner kind."""
        match = _OBJECT.match(path)
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):
            return
        if match is None or not isinstance(obj, dict) or not owned_by_kind(obj, owner):
            return
        namespace = match.group("ns") or ""
        try:
            self.on_child(
                Child(
                    api_version=str(obj.get("apiVersion") or ""),
                    kind=str(obj.get("kind") or ""),
                    namespaced=bool(match.group("namespaced")),
                    same_namespace=bool(namespace) and namespace == owner.namespace,
                    owner=owner,
                )
            )
        except Exception:  # a dependent-watch problem must never fail the role's request
            log.exception("could not recover a dependent watch for %s", obj.get("kind"))

    def _on_create(self, path: str, owner: Owner, body: bytes) -> bytes:
        """The body to forward for a create: the owner written in, and the child's kind reported.

        Raises ``accepting.BadRequest`` (503) when discovery cannot say whether the kind is stored:
        sending the object without its owner could leave it unowned and unwatched for good.
        """
        match = _COLLECTION.match(path)
        if not match:
            return body  # a subresource or something other than a plain create
        try:
            obj = json.loads(body)
        except ValueError:
            return body
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str) or not obj["kind"]:
            return body
        gvk = GVK(match.group("group") or "", match.group("core") or match.group("version"), obj["kind"])
        try:
            resource = self.kube.resource(gvk)
        except ApiError as exc:
            if exc.status == 404:
                return body  # a kind the API server does not serve: it refuses the create itself
            raise accepting.BadRequest(503, f"cannot tell whether {gvk} objects are stored: {exc}") from exc
        if not resource.persisted:
            # A review (SelfSubjectAccessReview, TokenReview...): a question in the shape of an object, never
            # stored, which the API server refuses any metadata; nothing to own and nothing to watch.
            return body
        # Where the child lives is the request path's business: the body of a cluster-scoped object may
        # still carry a namespace (a role's task-level `namespace:`), which the API server ignores.
        namespace = match.group("ns") if resource.namespaced else None
        if self.inject:
            inject_owner(obj, owner, namespace)
        try:
            self.on_child(
                Child(
                    api_version=gvk.api_version,
                    kind=gvk.kind,
                    namespaced=resource.namespaced,
                    same_namespace=bool(namespace) and namespace == owner.namespace,
                    owner=owner,
                )
            )
        except Exception:  # a dependent-watch problem must never fail the role's request
            log.exception("could not register a dependent watch for %s", obj.get("kind"))
        return json.dumps(obj).encode()
