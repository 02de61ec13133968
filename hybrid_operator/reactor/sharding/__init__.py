"""Sharding: replicas share a kind's objects through a ring of Leases (``--sharding``).

``rules`` (pure: which member owns an object, when a hand-over is safe), ``members`` (the member Leases on
the API server, through ``kube``), ``ring`` (what stands between the queue and the workers).
"""
