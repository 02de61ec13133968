"""Fixtures of the OpenStack integration tests: a cloud to create servers in.

``openstack_cloud`` (session) is the user's own cloud when ``OS_CLOUD`` or ``OS_CLIENT_CONFIG_FILE`` is set,
otherwise the project's local cloud, brought up with ``hack/local-cloud.sh up`` (installed on first use,
then cached; see docs/getting-started/local-cloud.md). A local cloud this fixture started is stopped at the end of the
session unless ``LOCAL_CLOUD_KEEP=1`` or the session is one of several pytest-xdist workers (they share it);
one that was already running is left alone.

Tests get a plain project user (cloud ``local`` of the local cloud), as the operator should run; the
admin cloud (``local-admin``) is there for checks a member cannot make, and is None on a user's cloud
unless ``OS_ADMIN_CLOUD`` names one in the same clouds.yaml.

``cloud`` is a project user's openstacksdk connection straight to the cloud (never through a test's fault
proxy); ``cleanup`` deletes, after a test, whatever VirtualMachine and server of its namespace are left.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import openstack.config
import openstack.connection
import pytest
from kubernetes.client.rest import ApiException

from tests.integration.conftest import Objects, wait_until

from .vms import G, P, V, servers_of

ROOT = Path(__file__).resolve().parents[3]
LOCAL_CLOUD = ROOT / "hack" / "local-cloud.sh"


class CloudConfig(NamedTuple):
    clouds_yaml: Path
    cloud: str
    admin_cloud: str | None = None

    def connect(self, *, admin: bool = False) -> openstack.connection.Connection:
        """An openstacksdk connection to the project cloud, or to the admin cloud (skips without one)."""
        name = self.admin_cloud if admin else self.cloud
        if name is None:
            pytest.skip("needs an admin cloud (set OS_ADMIN_CLOUD)")
        loader = openstack.config.OpenStackConfig(config_files=[str(self.clouds_yaml)])
        return openstack.connection.Connection(config=loader.get_one(cloud=name))

    def env(self) -> dict[str, str]:
        """Environment for a process that should use the project cloud (the operator, ansible)."""
        return {"OS_CLIENT_CONFIG_FILE": str(self.clouds_yaml), "OS_CLOUD": self.cloud}


def _users_cloud() -> CloudConfig:
    cloud = os.environ.get("OS_CLOUD", "local")
    files = [os.environ["OS_CLIENT_CONFIG_FILE"]] if os.environ.get("OS_CLIENT_CONFIG_FILE") else None
    loader = openstack.config.OpenStackConfig(config_files=files)
    if not loader.config_filename:
        pytest.fail(f"OS_CLOUD={cloud} is set but no clouds.yaml was found")
    return CloudConfig(Path(loader.config_filename), cloud, os.environ.get("OS_ADMIN_CLOUD"))


@pytest.fixture(scope="session")
def openstack_cloud() -> Iterator[CloudConfig]:
    warnings.filterwarnings("ignore", module="openstack")
    if os.environ.get("OS_CLOUD") or os.environ.get("OS_CLIENT_CONFIG_FILE"):
        yield _users_cloud()
        return
    # Workers of one pytest -n run share the cloud: one brings it up (the others wait on the lock and find
    # it running), and none takes it down under the others; hack/test.sh brings it up before them all.
    (ROOT / "build").mkdir(exist_ok=True)
    with open(ROOT / "build" / "local-cloud.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        was_running = subprocess.run([str(LOCAL_CLOUD), "status"], capture_output=True, check=False).returncode == 0
        # progress goes to stderr (shown with -s); the clouds.yaml path is the last line of stdout
        proc = subprocess.run([str(LOCAL_CLOUD), "up"], stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        pytest.fail(f"hack/local-cloud.sh up failed (exit {proc.returncode}); run it by hand to see why")
    yield CloudConfig(Path(proc.stdout.strip().splitlines()[-1]), "local", "local-admin")
    alone = "PYTEST_XDIST_WORKER" not in os.environ
    if alone and not was_running and os.environ.get("LOCAL_CLOUD_KEEP") != "1":
        subprocess.run([str(LOCAL_CLOUD), "down"], capture_output=True, check=False)


@pytest.fixture
def cloud(openstack_cloud: CloudConfig) -> openstack.connection.Connection:
    return openstack_cloud.connect()


@pytest.fixture
def cleanup(operator: Any, objects: Objects, namespace: str, cloud: openstack.connection.Connection) -> Iterator[None]:
    """After the test (before the operator stops): nothing of this namespace left in cloud or cluster."""
    yield
    for item in objects.custom.list_namespaced_custom_object(G, V, namespace, P)["items"]:
        name = item["metadata"]["name"]
        try:
            objects.delete(G, V, P, name)
            wait_until(lambda n=name: objects.get(G, V, P, n) is None, 120, f"{name} deleted by the operator")
        except (AssertionError, ApiException):
            objects.patch(G, V, P, name, {"metadata": {"finalizers": None}})
    for server in servers_of(cloud, namespace):
        cloud.compute.delete_server(server, ignore_missing=True)
