"""Seed and wait for the local cloud; run by hack/local-cloud.sh with the cloud's own virtualenv.

    bootstrap.py register    service project, service users, catalog, project `demo` with user `demo`
                             (once, into the database template every `up` copies; `up` rewrites the
                             catalog's URLs to its own ports)
    bootstrap.py ready T0    wait until a nova-compute started after T0 is up, mapped and in placement,
                             write its node uuid to the compute_id file, then seed flavors, image, network

One process per step instead of one `openstack` CLI call per object: an order of magnitude faster. Every
step is idempotent (find before create), so a retried `up` does not duplicate anything. Reads the
clouds.yaml from OS_CLIENT_CONFIG_FILE (cloud `local-admin`) and ports and passwords from the environment
that hack/local-cloud.sh exports.
"""

import datetime
import io
import os
import sys
import time
import warnings

warnings.simplefilter("ignore")

import openstack  # noqa: E402  (after the warnings filter: keystoneauth warns on import)

ADMIN_CLOUD = "local-admin"
REGION = "RegionOne"
FLAVORS = [  # name, vCPUs, RAM MiB, disk GiB
    ("small", 1, 512, 1),
    ("medium", 2, 2048, 10),
    ("large", 4, 8192, 20),
]
IMAGE = "cirros"


def connect() -> openstack.connection.Connection:
    return openstack.connect(cloud=ADMIN_CLOUD)


def register() -> None:
    conn = connect()
    idc = conn.identity
    service_password = os.environ["LOCAL_CLOUD_SERVICE_PASSWORD"]
    # one listing per kind instead of a find (two requests) per object: keystone is busy starting up
    roles = {r.name: r for r in idc.roles()}
    projects = {p.name: p for p in idc.projects()}
    users = {u.name: u for u in idc.users()}
    services = {s.name: s for s in idc.services()}
    endpoints = {(e.service_id, e.interface) for e in idc.endpoints()}

    def project(name: str) -> openstack.identity.v3.project.Project:
        return projects.get(name) or idc.create_project(name=name, domain_id="default")

    def user(name: str, password: str, **extra: str) -> openstack.identity.v3.user.User:
        return users.get(name) or idc.create_user(name=name, password=password, domain_id="default", **extra)

    service = project("service")
    for name in ("nova", "placement", "glance", "neutron"):
        service_user = user(name, service_password)
        idc.assign_project_role_to_user(service, service_user, roles["admin"])
        idc.assign_project_role_to_user(service, service_user, roles["service"])
    demo = project("demo")
    demo_user = user("demo", os.environ["LOCAL_CLOUD_DEMO_PASSWORD"], default_project_id=demo.id)
    idc.assign_project_role_to_user(demo, demo_user, roles["member"])
    port = os.environ.__getitem__
    catalog = [
        ("placement", "placement", f"http://127.0.0.1:{port('PLACEMENT_PORT')}"),
        ("glance", "image", f"http://127.0.0.1:{port('GLANCE_PORT')}"),
        ("nova", "compute", f"http://127.0.0.1:{port('NOVA_PORT')}/v2.1"),
        ("neutron", "network", f"http://127.0.0.1:{port('NEUTRON_PORT')}"),
    ]
    for name, service_type, url in catalog:
        svc = services.get(name) or idc.create_service(name=name, type=service_type)
        # public and internal: the services' own clients look for internal first, then public
        for interface in ("public", "internal"):
            if (svc.id, interface) not in endpoints:
                idc.create_endpoint(service_id=svc.id, interface=interface, url=url, region_id=REGION)
    print("registered service users, catalog and project demo")


def wait_ready(t0: float, compute_id_file: str, timeout: float = 300) -> None:
    since = datetime.datetime.fromtimestamp(t0, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    conn = None
    last_error = ""
    while True:
        try:
            conn = conn or connect()
            services = [
                s
                for s in conn.compute.services()
                if s.binary == "nova-compute" and s.state == "up" and (s.updated_at or "") >= since
            ]
            hypervisors = [h for h in conn.compute.hypervisors() if h.status == "enabled" and h.state == "up"]
            providers = list(conn.placement.resource_providers())
            if services and hypervisors and providers:
                break
            last_error = (
                f"compute services up {len(services)}, hypervisors {len(hypervisors)}, "
                f"resource providers {len(providers)}"
            )
        except Exception as exc:  # services still starting: any error means "not yet"
            last_error = repr(exc)[:300]
        if time.time() - t0 > timeout:
            sys.exit(f"timeout waiting for nova-compute ({last_error})")
        time.sleep(1)
    # nova's fake driver never writes the compute_id file; without it nova-compute refuses to restart.
    if not os.path.exists(compute_id_file):
        with open(compute_id_file, "w") as f:
            f.write(hypervisors[0].id)
    print(f"nova-compute ready {time.time() - t0:.0f}s after start")
    seed(conn)


def seed(conn: openstack.connection.Connection) -> None:
    for name, vcpus, ram, disk in FLAVORS:
        if not conn.compute.find_flavor(name):
            conn.compute.create_flavor(name=name, vcpus=vcpus, ram=ram, disk=disk, is_public=True)
    if not conn.image.find_image(IMAGE):
        # A tiny raw image of zeros: the fake hypervisor never reads it.
        conn.image.create_image(
            name=IMAGE,
            disk_format="raw",
            container_format="bare",
            visibility="public",
            data=io.BytesIO(bytes(64 * 1024)),
            wait=True,
        )
    if not conn.network.find_network("private"):
        net = conn.network.create_network(name="private", is_shared=True)
        conn.network.create_subnet(
            network_id=net.id, name="private-subnet", ip_version=4, cidr="10.0.0.0/24", is_dhcp_enabled=False
        )
    print(
        "seeded flavors",
        [f.name for f in conn.compute.flavors()],
        "images",
        [i.name for i in conn.image.images()],
        "networks",
        [n.name for n in conn.network.networks()],
    )


def main(argv: list[str]) -> None:
    if argv[1:2] == ["register"]:
        register()
    elif argv[1:2] == ["ready"] and len(argv) == 4:
        wait_ready(float(argv[2]), argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
