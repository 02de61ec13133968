"""Ask the API server who a bearer token belongs to (TokenReview) and what it may do (SubjectAccessReview).

Called by ``metricsauth`` for each scrape of a secured /metrics it has not decided recently; this is how
controller-runtime's ``--metrics-require-rbac`` and kube-rbac-proxy check callers, so the ServiceAccount of
the operator needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews``
(deploy/rbac/metrics_auth_role.yaml). ``proxy.upgrading`` asks about the operator itself (``may_i``, a
SelfSubjectAccessReview, which every authenticated identity may create) before it relays a run's exec.
Errors stay ``ApiError``: the caller decides what a failed review means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict, cast

from hybrid_operator.kube.client import Kube


class UserInfo(TypedDict, total=False):
    """``status.user`` of a TokenReview, as the API server returns it."""

    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


@dataclass(frozen=True)
class Identity:
    """Who a token belongs to: what a SubjectAccessReview needs to ask about them."""

    username: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def from_user_info(cls, info: UserInfo) -> Identity:
        extra = info.get("extra") or {}
        return cls(
            username=str(info.get("username", "")),
            uid=str(info.get("uid", "")),
            groups=tuple(str(g) for g in info.get("groups") or ()),
            extra=tuple(sorted((str(k), tuple(str(v) for v in vs or ())) for k, vs in extra.items())),
        )


def review_token(kube: Kube, token: str) -> Identity | None:
    """The identity behind ``token``, or None when the API server does not authenticate it."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    status: dict[str, Any] = (
        kube.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=body).get("status") or {}
    )
    if not status.get("authenticated"):
        return None
    user = cast(UserInfo, status.get("user") or {})
    return Identity.from_user_info(user)


def may_access(kube: Kube, who: Identity, verb: str, path: str) -> bool:
    """Whether ``who`` may ``verb`` the non-resource URL ``path`` (e.g. get /metrics)."""
    spec: dict[str, Any] = {
        "user": who.username,
        "groups": list(who.groups),
        "nonResourceAttributes": {"path": path, "verb": verb},
    }
    if who.uid:
        spec["uid"] = who.uid
    if who.extra:
        spec["extra"] = {k: list(v) for k, v in who.extra}
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
    status = kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body).get("status")
    return bool((status or {}).get("allowed"))


def may_i(
    kube: Kube, verb: str, *, resource: str, group: str = "", subresource: str = "", namespace: str = "", name: str = ""
) -> bool:
    """Whether the operator's own credentials may ``verb`` the resource (e.g. create pods/exec of one pod)."""
    attributes = {
        "verb": verb,
        "group": group,
        "resource": resource,
        "subresource": subresource,
        "namespace": namespace,
        "name": name,
    }
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {k: v for k, v in attributes.items() if v}},
    }
    status = kube.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=body).get("status")
    return bool((status or {}).get("allowed"))
