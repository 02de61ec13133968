"""The reconcile machinery: queue objects, reconcile them one at a time, report the outcome.

The only package that imports both ``kube`` and ``ansible``.
"""
