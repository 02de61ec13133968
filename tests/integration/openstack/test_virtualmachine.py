"""The VirtualMachine operator end to end: real API server, real operator process, real OpenStack.

The operator runs roles/virtualmachine as the shipped watches.yaml maps it, against the cloud of the
``openstack_cloud`` fixture (the local cloud of hack/local-cloud.sh unless OS_CLOUD is set) as a plain
project user. Every test deletes its VirtualMachines while the operator still runs (the finalizer deletes
the servers); a safety net afterwards deletes whatever server of the test's namespace is left and drops
finalizers, so a failed test leaks nothing into the cloud or the cluster.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import openstack.connection
import openstack.exceptions
import pytest
import yaml

from tests.integration.conftest import Objects, condition, wait_until
from tests.integration.faults import descendants, running

from .conftest import CloudConfig
from .vms import (
    FINALIZER,
    SETTLE,
    UID_KEY,
    G,
    P,
    V,
    active,
    delete_and_wait,
    reasons,
    servers_of,
    status,
    vm,
    wait_status,
    watches,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.cloud,
    pytest.mark.filterwarnings("ignore::openstack.warnings.OpenStackWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:openstack"),
]


def test_lifecycle_create_stop_start_resize_delete(
    operator: Any,
    objects: Objects,
    namespace: str,
    openstack_cloud: CloudConfig,
    cloud: openstack.connection.Connection,
    cleanup: None,
    tmp_path: Path,
) -> None:
    operator(watches(tmp_path), env=openstack_cloud.env())
    created = objects.create(G, V, P, vm("web"))

    st = active(objects, "web")
    server = cloud.compute.get_server(st["server"]["id"])
    assert server.name == f"vm-{namespace}-web"
    assert server.metadata[UID_KEY] == created["metadata"]["uid"]
    assert server.status == "ACTIVE"
    assert server.flavor["original_name"] == "small" or openstack_cloud.cloud != "local"
    assert st["server"]["usage"] == {"cpu": server.flavor["vcpus"], "memory": "512Mi"}
    assert st["lastUpdateTime"]
    assert FINALIZER in objects.get(G, V, P, "web")["metadata"]["finalizers"]
    assert objects.successful(G, V, P, "web")
    assert "Created" in reasons(objects, "web")

    objects.patch(G, V, P, "web", {"spec": {"action": "shutoff"}})
    st = active(objects, "web", "SHUTOFF")
    assert cloud.compute.get_server(server.id).status == "SHUTOFF"

    objects.patch(G, V, P, "web", {"spec": {"action": "active"}})
    active(objects, "web", "ACTIVE")
    assert cloud.compute.get_server(server.id).status == "ACTIVE"

    objects.patch(G, V, P, "web", {"spec": {"resource": {"cpu": 2, "memory": "2Gi", "rootDisk": "10Gi"}}})
    st = wait_status(objects, "web", lambda s: (s.get("server") or {}).get("usage", {}).get("cpu") == 2, "2 vCPUs")
    assert st["server"]["usage"] == {"cpu": 2, "memory": "2Gi"}
    assert st["server"]["id"] == server.id  # resized in place, not replaced
    resized = cloud.compute.get_server(server.id)
    assert (resized.flavor["vcpus"], resized.flavor["ram"]) == (2, 2048)
    assert resized.status == "ACTIVE"
    assert "Resized" in reasons(objects, "web")

    delete_and_wait(objects, "web")
    with pytest.raises(openstack.exceptions.NotFoundException):
        cloud.compute.get_server(server.id)
    assert servers_of(cloud, namespace) == []


def test_what_does_not_fit_or_exist_fails_with_a_reason_and_leaks_nothing(
    operator: Any,
    objects: Objects,
    namespace: str,
    openstack_cloud: CloudConfig,
    cloud: openstack.connection.Connection,
    cleanup: None,
    tmp_path: Path,
) -> None:
    operator(watches(tmp_path), env=openstack_cloud.env())
    objects.create(G, V, P, vm("huge", resource={"cpu": 512, "memory": "64Ti", "rootDisk": "1Gi"}))
    objects.create(G, V, P, vm("imageless", image=f"no-such-image-{uuid.uuid4().hex[:6]}"))

    for name, reason, words in (
        ("huge", "NoFlavorFits", "No flavor has 512 vCPUs"),
        ("imageless", "ImageNotFound", "does not exist"),
    ):
        st = wait_status(objects, name, lambda s: s.get("phase") == "Failed", "phase Failed")
        assert words in st["reason"]
        failure = condition(objects.get(G, V, P, name), "Failure")
        assert failure["status"] == "True" and failure["reason"] == reason
        assert words in failure["message"]
        wait_until(lambda n=name, r=reason: r in reasons(objects, n), 60, f"Warning Event {reason}")

    assert servers_of(cloud, namespace) == []
    delete_and_wait(objects, "huge", "imageless")  # the finalizer has no server to delete
    assert servers_of(cloud, namespace) == []


def test_server_deleted_behind_the_operators_back_is_reported_and_recreated(
    operator: Any,
    objects: Objects,
    namespace: str,
    openstack_cloud: CloudConfig,
    cloud: openstack.connection.Connection,
    cleanup: None,
    tmp_path: Path,
) -> None:
    operator(watches(tmp_path, period="5s"), env=openstack_cloud.env())
    objects.create(G, V, P, vm("fragile"))
    old = active(objects, "fragile")["server"]["id"]

    cloud.compute.delete_server(old)
    wait_until(lambda: "ServerMissing" in reasons(objects, "fragile"), SETTLE, "Warning Event ServerMissing")
    st = wait_status(
        objects,
        "fragile",
        lambda s: s.get("phase") == "Active" and (s.get("server") or {}).get("id") not in ("", None, old),
        "a new server Active",
    )
    assert [s.id for s in servers_of(cloud, namespace)] == [st["server"]["id"]]
    delete_and_wait(objects, "fragile")


@pytest.mark.timeout(1800)
def test_an_operator_killed_during_6_creations_makes_exactly_one_server_each_and_leaks_none(
    operator: Any,
    objects: Objects,
    namespace: str,
    openstack_cloud: CloudConfig,
    cloud: openstack.connection.Connection,
    cleanup: None,
    tmp_path: Path,
) -> None:
    """kill -9 of the operator while it creates the servers of the first 3 VirtualMachines, the other 3
    created while it is dead, then a new operator: every VirtualMachine Active with exactly one server (a
    server asked for just before the kill is found again by the uid in its metadata, not created twice),
    the dead operator's Ansible processes gone, and no server left after the deletions. (3 and 3: the
    local cloud's services run one process each, and this test sets the length of CI's parallel step.)"""
    path = watches(tmp_path)
    args = ("--max-concurrent-reconciles", "4")
    first = operator(path, *args, env=openstack_cloud.env())
    started = time.monotonic()
    # fleet-1 and fleet-10..12: a name that prefixes others
    names = [f"fleet-{i}" for i in (1, 2, 3, 10, 11, 12)]
    uids = {n: objects.create(G, V, P, vm(n))["metadata"]["uid"] for n in names[:3]}

    # Kill -9 in the middle: some servers asked for, not all VirtualMachines Active yet.
    wait_until(lambda: len(servers_of(cloud, namespace)) >= 2, SETTLE, "the first servers", interval=0.5)
    left_behind = descendants(first.proc.pid)
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(10)
    killed_with = len(servers_of(cloud, namespace))
    assert sum(status(objects, n).get("phase") == "Active" for n in names) < 3
    uids |= {n: objects.create(G, V, P, vm(n))["metadata"]["uid"] for n in names[3:]}

    operator(path, *args, env=openstack_cloud.env())
    ids = {n: active(objects, n)["server"]["id"] for n in names}
    took = time.monotonic() - started

    servers = servers_of(cloud, namespace)
    assert len(servers) == len(names), sorted(s.name for s in servers)
    assert {s.id for s in servers} == set(ids.values())
    assert {s.metadata[UID_KEY]: s.name for s in servers} == {uids[n]: f"vm-{namespace}-{n}" for n in names}
    wait_until(lambda: not [p for p in left_behind if running(p)], 30, "the killed operator's processes gone")

    deleted = time.monotonic()
    delete_and_wait(objects, *names)
    assert servers_of(cloud, namespace) == []
    print(
        f"\noperator killed with {killed_with} of 3 servers asked for ({len(left_behind)} child processes), "
        f"3 more VirtualMachines created while it was dead: all 6 Active {took:.1f}s after the first creation, "
        f"exactly one server each; all deleted, no server left, {time.monotonic() - deleted:.1f}s after delete"
    )


def test_credentials_secret_is_used_and_its_password_appears_nowhere(
    operator: Any,
    objects: Objects,
    namespace: str,
    openstack_cloud: CloudConfig,
    cloud: openstack.connection.Connection,
    cleanup: None,
    tmp_path: Path,
) -> None:
    user_cloud = yaml.safe_load(openstack_cloud.clouds_yaml.read_text())["clouds"][openstack_cloud.cloud]
    password = user_cloud["auth"]["password"]
    assert len(password) >= 8  # a short one could turn up by chance
    objects.core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "tenant-credentials"},
            "stringData": {"clouds.yaml": yaml.safe_dump({"clouds": {"tenant": user_cloud}})},
        },
    )
    # The operator's own environment names no usable cloud: only the Secret can make this work.
    empty = tmp_path / "no-clouds.yaml"
    empty.write_text("clouds: {}\n")
    op = operator(watches(tmp_path), env={"OS_CLIENT_CONFIG_FILE": str(empty), "OS_CLOUD": "nowhere"})
    objects.create(G, V, P, vm("tenant-vm", credentialsSecret="tenant-credentials"))
    server_id = active(objects, "tenant-vm")["server"]["id"]
    assert cloud.compute.get_server(server_id).status == "ACTIVE"
    delete_and_wait(objects, "tenant-vm")
    assert servers_of(cloud, namespace) == []

    artifacts = [p for p in op.artifacts.rglob("*") if p.is_file()]
    assert artifacts, "the operator kept no artifacts to look into"
    leaks = [str(p) for p in artifacts if password.encode() in p.read_bytes()]
    assert leaks == []
    assert password not in op.log()
    for event in objects.core.list_namespaced_event(namespace).items:
        assert password not in (event.message or "")
    # the role's private copy of the clouds.yaml is gone too
    assert not list(Path(tempfile.gettempdir()).glob("virtualmachine-*.clouds.yaml"))
