"""What the VirtualMachine tests share: the kind's coordinates, a VirtualMachine to create, the shipped
watches.yaml entry for it, and waits on its status and on the servers of a namespace in the cloud.

Used by test_virtualmachine.py (the role end to end) and test_cloud_faults.py (the cloud misbehaving);
the ``cloud`` and ``cleanup`` fixtures built on it are in conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import openstack.connection
import yaml

from tests.integration.conftest import ROOT, Objects, wait_until

G, V, P = "cloudnative.tw", "v1alpha1", "virtualmachines"
FINALIZER = "cloudnative.tw/finalizer"
UID_KEY, NAMESPACE_KEY = "hybrid-operator:uid", "hybrid-operator:namespace"
# Generous: a run does several OpenStack calls, and CI machines are small and busy.
SETTLE = 300


def watches(tmp_path: Path, period: str = "60s", **role_vars: Any) -> Path:
    """The VirtualMachine entry of the shipped watches.yaml, with the role by path, our period and, if any,
    role variables (the entry's ``vars``)."""
    entries = yaml.safe_load((ROOT / "watches.yaml").read_text())
    entry = next(e for e in entries if e["group"] == G and e["kind"] == "VirtualMachine")
    assert entry["finalizer"] == {"name": FINALIZER, "vars": {"state": "absent"}}
    entry = {**entry, "role": str(ROOT / "roles" / entry["role"]), "reconcilePeriod": period}
    if role_vars:
        entry["vars"] = {**(entry.get("vars") or {}), **role_vars}
    path = tmp_path / "watches.yaml"
    path.write_text(yaml.safe_dump([entry]))
    return path


def vm(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {"resource": {"cpu": 1, "memory": "512Mi", "rootDisk": "1Gi"}, "image": "cirros", **spec},
    }


def status(objects: Objects, name: str) -> dict[str, Any]:
    return ((objects.get(G, V, P, name) or {}).get("status")) or {}


def wait_status(objects: Objects, name: str, check: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    return wait_until(lambda: (lambda s: s if check(s) else None)(status(objects, name)), SETTLE, f"{name}: {what}")


def active(objects: Objects, name: str, state: str = "ACTIVE") -> dict[str, Any]:
    return wait_status(
        objects,
        name,
        lambda s: s.get("phase") == "Active" and (s.get("server") or {}).get("state") == state,
        f"phase Active, server {state}",
    )


def servers_of(conn: openstack.connection.Connection, namespace: str) -> list[Any]:
    return [s for s in conn.compute.servers() if (s.metadata or {}).get(NAMESPACE_KEY) == namespace]


def reasons(objects: Objects, name: str) -> set[str]:
    return {e.reason for e in objects.events(name)}


def delete_and_wait(objects: Objects, *names: str) -> None:
    for name in names:
        objects.delete(G, V, P, name)
    for name in names:
        wait_until(lambda n=name: objects.get(G, V, P, n) is None, SETTLE, f"{name} deleted")
