"""ML2 mechanism driver that binds every port without any agent or dataplane.

The neutron counterpart of nova's fake virt driver, for the local test cloud (hack/local-cloud.sh): the
Neutron API, database and ML2 plugin are real, only the L2 dataplane is skipped. Neutron ships no
agent-less mechanism driver, and without a bound port nova cannot build a server on a network. Ports bind
with vif_type 'ovs' (nova's fake driver ignores VIFs) and are ACTIVE at once.
"""

from neutron_lib import constants
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api


class FakeBindMechanismDriver(api.MechanismDriver):
    """Bind the first segment offered, for every port, on every host."""

    def initialize(self):
        pass

    @property
    def connectivity(self):
        return portbindings.CONNECTIVITY_L2

    def bind_port(self, context):
        for segment in context.segments_to_bind:
            context.set_binding(
                segment[api.ID],
                portbindings.VIF_TYPE_OVS,
                {portbindings.CAP_PORT_FILTER: False},
                status=constants.PORT_STATUS_ACTIVE,
            )
            return
