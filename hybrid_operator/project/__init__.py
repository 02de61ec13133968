"""The operator project on disk: scaffold it (``scaffolding``), generate its CRDs from its roles (``crds``)."""
