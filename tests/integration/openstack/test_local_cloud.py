"""The cloud the OpenStack tests run against works with the operator's own openstacksdk.

Runs with the project's virtualenv (openstacksdk 4.14.0, the version the openstack.cloud collection
needs), against the local cloud (hack/local-cloud.sh) or the user's (OS_CLOUD), as a plain project user.
"""

from __future__ import annotations

import time
import uuid

import openstack.exceptions
import pytest

from .conftest import CloudConfig

pytestmark = [
    pytest.mark.cloud,
    # openstacksdk's notes about its own future API, not about this project
    pytest.mark.filterwarnings("ignore::openstack.warnings.OpenStackWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:openstack"),
]


def test_flavors_and_images_are_there(openstack_cloud: CloudConfig) -> None:
    conn = openstack_cloud.connect()
    flavors = list(conn.compute.flavors())
    images = list(conn.image.images())
    assert len(flavors) >= 2, [f.name for f in flavors]
    assert len(images) >= 1
    if openstack_cloud.cloud == "local" and openstack_cloud.admin_cloud == "local-admin":
        # what hack/local-cloud.sh promises
        by_name = {f.name: (f.vcpus, f.ram, f.disk) for f in flavors}
        assert by_name["small"] == (1, 512, 1)
        assert by_name["medium"] == (2, 2048, 10)
        assert "cirros" in {i.name for i in images}


def test_server_without_network_boots_and_goes_away(openstack_cloud: CloudConfig) -> None:
    conn = openstack_cloud.connect()
    flavor = min(conn.compute.flavors(), key=lambda f: (f.vcpus, f.ram, f.disk))
    images = [i for i in conn.image.images() if i.status == "active"]
    image = next((i for i in images if i.name == "cirros"), images[0])
    name = f"test-local-cloud-{uuid.uuid4().hex[:8]}"
    server = conn.compute.create_server(
        name=name, flavor_id=flavor.id, image_id=image.id, networks="none", metadata={"test": name}
    )
    try:
        server = conn.compute.wait_for_server(server, status="ACTIVE", interval=1, wait=180)
        assert server.status == "ACTIVE"
        assert conn.compute.fetch_server_metadata(server).metadata == {"test": name}
        assert server.id in {s.id for s in conn.compute.servers(name=name)}
    finally:
        conn.compute.delete_server(server, ignore_missing=True)
    conn.compute.wait_for_delete(server, interval=1, wait=120)

    def gone() -> bool:  # Nova may still show it as DELETED for a moment after wait_for_delete returns
        try:
            return conn.compute.get_server(server.id).status == "DELETED"
        except openstack.exceptions.NotFoundException:
            return True

    deadline = time.monotonic() + 60
    while not gone():
        assert time.monotonic() < deadline, "the server is still there a minute after its deletion"
        time.sleep(1)
    assert name not in {s.name for s in conn.compute.servers()}
