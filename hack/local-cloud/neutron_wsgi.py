"""WSGI entry point of the local cloud's neutron-api (hack/local-cloud.sh runs it under uwsgi).

neutron's get_ports() touches the backref Port.port_forwardings before SQLAlchemy has configured the
mappers when GET /ports is the first request a fresh neutron-api serves (as it is from nova): an
AttributeError, answered with HTTP 500. Configuring the mappers eagerly at import avoids it.
"""

import sqlalchemy.orm
from neutron.wsgi.api import application  # noqa: F401  (the object uwsgi serves)

sqlalchemy.orm.configure_mappers()
