#!/usr/bin/python
# Copyright: hybrid-operator contributors
# Apache License 2.0
"""Resize an OpenStack server to a flavor and confirm the resize; a no-op when it already has that flavor.

openstack.cloud (2.5.0 and 2.6.0, the releases installable without Galaxy) has no resize module, so the
VirtualMachine role calls this one. It uses the openstack.cloud collection's module base (the same
``cloud``/``auth``/``wait``/``timeout`` options and openstacksdk connection as every openstack.cloud module).
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: server_resize
short_description: Resize an OpenStack server to a flavor, then confirm
description:
  - Resizes a server to the given flavor, waits for C(VERIFY_RESIZE) and confirms the resize, then waits
    until the server is back in the state it had before (C(ACTIVE) or C(SHUTOFF)).
  - Idempotent. Nothing is done when the server already has the flavor. A resize that was left waiting for
    confirmation (C(VERIFY_RESIZE), for instance after the caller was killed) is confirmed first; one still
    in progress (C(RESIZE)) is waited for.
  - Needs the openstack.cloud collection and openstacksdk, like the openstack.cloud modules.
options:
  server:
    description: Name or ID of the server. An ID is safest, names need not be unique.
    type: str
    required: true
    aliases: [name]
  flavor:
    description: Name or ID of the flavor to resize to.
    type: str
    required: true
  confirm:
    description:
      - Confirm the resize once the server reaches C(VERIFY_RESIZE). With C(false) the module returns with
        the server in C(VERIFY_RESIZE) (requires I(wait)) and the caller confirms or reverts.
    type: bool
    default: true
extends_documentation_fragment:
  - openstack.cloud.openstack
author: hybrid-operator contributors
"""

EXAMPLES = r"""
- name: Give the server two vCPUs and 2 GiB
  hybrid_operator.util.server_resize:
    cloud: local
    server: "{{ server_id }}"
    flavor: medium
    timeout: 300

- name: Resize without confirming, for a look before committing
  hybrid_operator.util.server_resize:
    server: web-1
    flavor: large
    confirm: false
"""

RETURN = r"""
server:
  description: The server after the resize (or as found, when nothing was to be done).
  returned: always
  type: dict
  sample:
    id: 6ad2c3d9-3b0c-4b6e-8f5a-0f5c1e7a5e21
    status: ACTIVE
    flavor: {original_name: medium, vcpus: 2, ram: 2048, disk: 10}
previous_flavor:
  description: Name of the flavor the server had before.
  returned: always
  type: str
  sample: small
"""

# Ansible modules import after their DOCUMENTATION (ansible-doc and ansible-test read it statically).
from typing import ClassVar  # noqa: E402

from ansible_collections.openstack.cloud.plugins.module_utils.openstack import OpenStackModule  # noqa: E402

# States a server can be resized from; a confirmed resize brings it back to the one it had.
RESIZABLE = ("ACTIVE", "SHUTOFF")


def flavor_name(server):
    """The flavor the server runs with: embedded (microversion >= 2.47) or only referenced by ID."""
    flavor = server.flavor or {}
    return flavor.get("original_name") or flavor.get("name") or flavor.get("id") or ""


def has_flavor(server, flavor):
    embedded = server.flavor or {}
    return flavor_name(server) in (flavor.name, flavor.id) or embedded.get("id") == flavor.id


class ServerResizeModule(OpenStackModule):
    argument_spec: ClassVar[dict] = dict(
        server=dict(required=True, aliases=["name"]),
        flavor=dict(required=True),
        confirm=dict(type="bool", default=True),
    )
    module_kwargs: ClassVar[dict] = dict(
        supports_check_mode=True,
        required_if=[("confirm", True, ("wait",))],
    )

    def run(self):
        compute = self.conn.compute
        server = compute.get_server(compute.find_server(self.params["server"], ignore_missing=False))
        flavor = compute.find_flavor(self.params["flavor"], ignore_missing=False)
        previous = flavor_name(server)

        # A resize somebody (maybe we, before a crash) started and did not finish: finish it first.
        changed = False
        if server.status == "RESIZE":
            server = self._wait(server, "VERIFY_RESIZE")
        if server.status == "VERIFY_RESIZE":
            if has_flavor(server, flavor) and not self.params["confirm"]:
                self.exit_json(changed=False, server=server.to_dict(computed=False), previous_flavor=previous)
            if self.ansible.check_mode:
                self.exit_json(changed=True, server=server.to_dict(computed=False), previous_flavor=previous)
            server = self._confirm(server)
            changed = True

        if has_flavor(server, flavor):
            self.exit_json(changed=changed, server=server.to_dict(computed=False), previous_flavor=previous)
        if server.status not in RESIZABLE:
            self.fail_json(
                msg=f"server {server.id} is {server.status}; it can be resized only when one of {', '.join(RESIZABLE)}"
            )
        if self.ansible.check_mode:
            self.exit_json(changed=True, server=server.to_dict(computed=False), previous_flavor=previous)

        status_before = server.status
        compute.resize_server(server, flavor.id)
        if self.params["wait"]:
            server = self._wait(server, "VERIFY_RESIZE")
            if self.params["confirm"]:
                self.conn.compute.confirm_server_resize(server)
                server = self._wait(server, status_before)
        self.exit_json(changed=True, server=server.to_dict(computed=False), previous_flavor=previous)

    def _wait(self, server, status):
        return self.conn.compute.wait_for_server(
            server, status=status, failures=["ERROR"], interval=1, wait=self.params["timeout"]
        )

    def _confirm(self, server):
        """Confirm a pending resize and wait until the server has left VERIFY_RESIZE."""
        self.conn.compute.confirm_server_resize(server)
        for _ in self.sdk.utils.iterate_timeout(
            timeout=self.params["timeout"], message="Timeout waiting for the resize confirmation", wait=1
        ):
            server = self.conn.compute.get_server(server.id)
            if server.status != "VERIFY_RESIZE":
                return server
        return server


def main():
    module = ServerResizeModule()
    module()


if __name__ == "__main__":
    main()
