"""Where a run's requests may go: the namespaces it may reach, checked on every request before anything else.

Called by ``server`` for every request that carries a run's token, before it is answered from a cache,
upgraded or forwarded. The reconciler gives each run its ``Reach`` with its token: with
``--run-namespaces=own`` its object's namespace plus what its watch declares (``runNamespaces`` in
watches.yaml), otherwise anywhere (what upstream's proxy allows).

What a confined run may not do: touch a namespaced resource in another namespace (``/api/v1/namespaces/b/
secrets/x``), list or watch a namespaced kind across all namespaces (``/api/v1/secrets``), or read, change or
delete another namespace itself (``/api/v1/namespaces/b``). Cluster-scoped kinds (nodes, CRDs, ClusterRoles)
and discovery stay reachable: they are the role's business, and the operator's RBAC bounds them. Whether a
kind is namespaced comes from discovery (``scope``); a kind discovery does not know is forwarded, and the
API server answers it (404).

Whatever the mode, a path with a dot segment or an escaped dot or slash (``..``, ``%2e``, ``%2F``) is refused:
no Kubernetes client sends one, and what the API server would make of it is not what the path says.
The first line of defence is in the runs themselves (``ansible/runsite``: a name that would build such a
path is refused before the URL exists); this one holds for any client a run starts, in any language.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from hybrid_operator.proxy.accepting import BadRequest

# (group, version, plural) -> True namespaced, False cluster-scoped, None unknown to discovery
Scope = Callable[[str, str, str], bool | None]
_ESCAPED = re.compile(r"%2[eEfF]")


@dataclass(frozen=True)
class Reach:
    """The namespaces a run may reach; ``None``: any."""

    namespaces: frozenset[str] | None = None

    def describe(self) -> str:
        if self.namespaces is None:
            return "any namespace"
        return ", ".join(sorted(self.namespaces)) or "no namespace"


ANYWHERE = Reach()


def check(reach: Reach, path: str, scope: Scope) -> None:
    """Raise ``BadRequest`` (400 for a path that is not plain, 403 outside ``reach``) or return."""
    if _ESCAPED.search(path) or any(part in (".", "..") for part in path.split("/")):
        raise BadRequest(400, "paths with dot segments or escaped dots or slashes are not accepted")
    if reach.namespaces is None:
        return
    parts = path.rstrip("/").split("/")[1:]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return  # /version, /api, /apis, /apis/<group>, /openapi/...: not a resource of any namespace
    if rest[:1] == ["watch"]:
        rest = rest[1:]
    if not rest or rest == ["namespaces"]:
        return  # discovery of a group version; the list of namespaces (a cluster-scoped kind)
    if rest[0] == "namespaces":
        namespace = rest[1]
        if namespace not in reach.namespaces:
            raise BadRequest(
                403,
                f"this run may reach {reach.describe()}, not namespace {namespace!r} (--run-namespaces=own; "
                "a watch may add namespaces with runNamespaces in watches.yaml)",
            )
        return
    if scope(group, version, rest[0]):
        raise BadRequest(
            403,
            f"this run may reach {reach.describe()}: not {rest[0]} across all namespaces (--run-namespaces=own)",
        )
