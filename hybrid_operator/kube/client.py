"""The one connection to the API server, and plain REST calls on any group/version/kind.

Built once by ``cli`` (kubeconfig, or the pod's service account) and shared by watching, patching, events
and leases. Objects stay plain dicts (``KubeObject``): no home-made models of Kubernetes types. Discovery
(kind -> plural, namespaced) is cached per group/version. HTTP errors become ``ApiError`` with the status
code, so callers can tell NotFound, Conflict and Gone apart without importing the client library.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from hybrid_operator.errors import ConfigError, TemporaryError
from hybrid_operator.kube import jsondecoding
from hybrid_operator.kube.objects import GVK, name_of, namespace_of

KubeObject = dict[str, Any]


# What the client's config loader raises for a file it cannot use: its own exception for a missing key,
# but also whatever the YAML parser, the base64 decoder or a dict lookup on a list raised on the way.
_UNUSABLE_CONFIG = (
    k8s_config.ConfigException,
    OSError,
    yaml.YAMLError,
    ValueError,
    TypeError,
    AttributeError,
    LookupError,
    RecursionError,
)


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ApiError(TemporaryError):
    """An HTTP error from the API server."""

    def __init__(self, status: int, reason: str, body: str = "", retry_after: float | None = None) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        self.retry_after = retry_after  # seconds the server asked us to wait (429, 503), if it said
        detail = reason
        with contextlib.suppress(ValueError, AttributeError):  # not a Status object
            detail = json.loads(body).get("message") or reason
        super().__init__(f"API server answered {status}: {detail}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def transient(self) -> bool:
        """Worth retrying as it is: no answer (0), a timeout, throttling or a server-side failure."""
        return self.status in (0, 408, 429) or self.status >= 500


class TooLarge(Exception):
    """An answer longer than the caller would decode (``Kube.request``'s ``max_bytes``)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"the answer has {size} bytes, more than the {limit} asked for")
        self.size = size
        self.limit = limit


@dataclass(frozen=True)
class Resource:
    gvk: GVK
    plural: str
    namespaced: bool
    # Whether objects of the kind can be read back (get, list and watch). Those that cannot (the review
    # kinds: SelfSubjectAccessReview, TokenReview...) are requests in the shape of an object, never stored:
    # the API server refuses them any metadata, and nothing could ever watch them.
    persisted: bool = True
    # Whether the kind has a status subresource: then its status is written only through it, by whoever
    # may update ``<plural>/status`` (the operator), never by an update of the object itself.
    status_subresource: bool = False

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.gvk.group}/{self.gvk.version}" if self.gvk.group else f"/api/{self.gvk.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


_KEEPALIVE = [
    *urllib3.connection.HTTPConnection.default_socket_options,
    (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    *[
        (socket.IPPROTO_TCP, getattr(socket, name), value)
        for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3))
        if hasattr(socket, name)
    ],
]


def context_namespace(kubeconfig: str | None) -> str:
    """The namespace of the kubeconfig's current context, as kubectl picks it ("default" if none)."""
    try:
        _contexts, current = k8s_config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    except (k8s_config.ConfigException, TypeError, OSError):
        return "default"
    return str((current or {}).get("context", {}).get("namespace") or "default")


_REDISCOVER = 10.0  # seconds before a plural discovery did not list is asked about again


def _by_plural(resources: Mapping[str, Resource] | None, plural: str) -> Resource | None:
    return next((r for r in (resources or {}).values() if r.plural == plural), None)


def _retry_after(raw: str | None) -> float | None:
    """Retry-After in seconds (the API server sends whole seconds), bounded to an hour."""
    if raw is None or not raw.strip().isdigit():
        return None
    return float(min(int(raw.strip()), 3600))


class Kube:
    """Thread-safe REST access to the API server."""

    def __init__(self, api: k8s_client.ApiClient) -> None:
        self.api = api
        self._discovery: dict[tuple[str, str], dict[str, Resource]] = {}
        self._discovered: dict[tuple[str, str], float] = {}  # when each document was last asked for
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> Kube:
        """A client from ``kubeconfig`` (or the default one), else from the pod's service account.

        Raises ConfigError, one line naming the file, when neither gives a usable configuration.
        """
        try:
            api = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context
            )
        except _UNUSABLE_CONFIG as exc:
            if kubeconfig:
                raise ConfigError(f"cannot use kubeconfig {kubeconfig}: {_one_line(exc)}") from exc
            try:
                k8s_config.load_incluster_config()  # type: ignore[no-untyped-call]
            except _UNUSABLE_CONFIG as in_cluster:
                raise ConfigError(
                    f"no usable kubeconfig ({_one_line(exc)}) and not in a cluster ({_one_line(in_cluster)}): "
                    "set --kubeconfig or KUBECONFIG"
                ) from in_cluster
            api = k8s_client.ApiClient()
        pool = max(16, int(api.configuration.connection_pool_maxsize or 0))
        api.configuration.connection_pool_maxsize = pool
        api.rest_client.pool_manager.connection_pool_kw["maxsize"] = pool
        # A connection whose peer vanished (a dropped NAT entry, a dead load balancer) is found by the
        # kernel within about a minute instead of never: idle 30 s, then 3 probes 10 s apart.
        api.rest_client.pool_manager.connection_pool_kw["socket_options"] = _KEEPALIVE
        return cls(api)

    # -- discovery -------------------------------------------------------------------------------------

    def resource(self, gvk: GVK) -> Resource:
        """kind -> plural and scope, from the API's discovery document (cached)."""
        with self._lock:
            cached = self._discovery.get((gvk.group, gvk.version))
        if cached is None or gvk.kind not in cached:
            cached = self._discover(gvk.group, gvk.version)
        if gvk.kind not in cached:
            raise ApiError(404, f"the API server does not serve {gvk} (is its CRD installed?)")
        return cached[gvk.kind]

    def namespaced(self, group: str, version: str, plural: str) -> bool | None:
        """Whether the resource served as ``plural`` in that group version is namespaced; None when discovery
        does not list it (then asked again at most every ``_REDISCOVER`` seconds: the plural comes from
        whatever path a run sent)."""
        with self._lock:
            cached = self._discovery.get((group, version))
            fresh = time.monotonic() - self._discovered.get((group, version), -_REDISCOVER) < _REDISCOVER
        found = _by_plural(cached, plural)
        if found is None and not fresh:
            try:
                found = _by_plural(self._discover(group, version), plural)
            except ApiError as exc:
                if exc.status != 404:
                    raise
        return None if found is None else found.namespaced

    def _discover(self, group: str, version: str) -> dict[str, Resource]:
        """The group version's discovery document, read now: kind -> its resource."""
        with self._lock:
            self._discovered[(group, version)] = time.monotonic()
        doc = self.request("GET", f"/apis/{group}/{version}" if group else f"/api/{version}")
        found: dict[str, Resource] = {}
        names = {str(item.get("name", "")) for item in doc.get("resources", [])}
        for item in doc.get("resources", []):
            if "/" in item.get("name", ""):
                continue  # subresources
            verbs = item.get("verbs")
            found[item["kind"]] = Resource(
                GVK(group, version, item["kind"]),
                item["name"],
                bool(item["namespaced"]),
                persisted=isinstance(verbs, list) and {"get", "list", "watch"} <= set(verbs),
                status_subresource=f"{item['name']}/status" in names,
            )
        with self._lock:
            self._discovery[(group, version)] = found
        return found

    # -- requests --------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = 30,
        max_bytes: int | None = None,
    ) -> KubeObject:
        """The decoded answer; with ``max_bytes``, ``TooLarge`` instead when the body is longer (decoding
        costs many times the body's size in memory, so a caller that can ask for less does)."""
        response = self._raw(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
        try:
            data = response.data
        finally:
            response.release_conn()
        if max_bytes is not None and len(data) > max_bytes:
            raise TooLarge(len(data), max_bytes)
        return jsondecoding.loads(data) if data else {}

    def stream(self, path: str, query: Mapping[str, Any], timeout: float) -> Iterator[dict[str, Any]]:
        """A watch: yields each event dict as the server sends it, until the server closes the stream."""
        response = self._raw("GET", path, query={**query, "watch": "true"}, timeout=(10, timeout))
        try:
            buffer = b""
            for chunk in response.stream(amt=65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield jsondecoding.loads(line)
        except urllib3.exceptions.HTTPError as exc:  # the stream broke: the caller resumes from its last version
            self._forget_connections(exc)
            raise ApiError(0, f"watch stream interrupted: {exc}") from exc
        finally:
            response.release_conn()

    def _raw(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = 30,
    ) -> urllib3.BaseHTTPResponse:
        url = self.api.configuration.host + path
        if query:
            url += "?" + urlencode({k: v for k, v in query.items() if v not in (None, "")})
        headers = {"Accept": "application/json", "User-Agent": "hybrid-operator"}
        self.api.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            response = self.api.rest_client.pool_manager.request(
                method,
                url,
                body=json.dumps(body).encode() if body is not None else None,
                headers=headers,
                preload_content=False,
                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]) if isinstance(timeout, tuple) else timeout,
                retries=False,
            )
        except urllib3.exceptions.HTTPError as exc:
            self._forget_connections(exc)
            raise ApiError(0, f"cannot reach the API server: {exc}") from exc
        if response.status >= 400:
            data = response.data.decode("utf-8", "replace")
            retry_after = _retry_after(response.headers.get("Retry-After"))
            response.release_conn()
            raise ApiError(response.status, response.reason or "", data, retry_after)
        return response

    def _forget_connections(self, exc: Exception) -> None:
        """After a timeout, drop every pooled connection: when one went silent (a dropped NAT entry, a
        half-dead load balancer), its idle siblings almost surely did too, and each would cost a timeout."""
        if isinstance(exc, urllib3.exceptions.TimeoutError | urllib3.exceptions.ProtocolError):
            self.api.rest_client.pool_manager.clear()

    # -- conveniences ----------------------------------------------------------------------------------

    def get(self, res: Resource, namespace: str | None, name: str) -> KubeObject:
        return self.request("GET", res.path(namespace, name))

    def get_or_none(self, res: Resource, namespace: str | None, name: str) -> KubeObject | None:
        """The object, or None when the API server says NotFound (gone is an answer, not an error);
        any other ``ApiError`` is raised."""
        try:
            return self.get(res, namespace, name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def apply(self, res: Resource, obj: KubeObject, *, field_manager: str, dry_run: bool = False) -> KubeObject:
        """Server-side apply of a whole object (created if missing); ``dry_run``: validated, defaulted and
        returned as it would be stored, nothing stored."""
        query = {"fieldManager": field_manager, "force": "true", "dryRun": "All" if dry_run else None}
        path = res.path(namespace_of(obj), name_of(obj))
        return self.request("PATCH", path, query=query, body=obj, content_type="application/apply-patch+yaml")

    def merge_patch(
        self, res: Resource, namespace: str | None, name: str, patch: Any, sub: str | None = None
    ) -> KubeObject:
        return self.request(
            "PATCH", res.path(namespace, name, sub), body=patch, content_type="application/merge-patch+json"
        )
