"""Everything that talks to the Kubernetes API server: client, watches, patches, events, leases.

The only package that imports the kubernetes client library.
"""
