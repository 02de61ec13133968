"""The directory first on every run's ``PYTHONPATH``: its ``sitecustomize`` checks Kubernetes names before
the client builds a URL from them (see there). Nothing else may live here: every run could import it."""
