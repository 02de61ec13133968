"""Kubernetes' rules for names, as the API server checks them (apimachinery's ``util/validation``).

Used by the watches loader to refuse at start-up a group, version, kind, label selector or finalizer name
the API server would refuse later, or worse, read differently: a label value ``b,c!=d`` put into a
selector query is two more requirements. Each check returns None for a valid name, else the problem in a
few words for a ``ConfigError``.
"""

from __future__ import annotations

import re

_DNS1123_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(?:\.{_DNS1123_LABEL})*", re.ASCII)
_DNS1035_LABEL = re.compile(r"[a-z](?:[-a-z0-9]*[a-z0-9])?", re.ASCII)
_NAME_PART = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)

SUBDOMAIN_MAX = 253
LABEL_MAX = 63


def dns1123_subdomain_problem(text: str) -> str | None:
    """Lower-case DNS names such as ``cache.example.com`` (API groups, name prefixes)."""
    if len(text) > SUBDOMAIN_MAX:
        return f"longer than {SUBDOMAIN_MAX} characters"
    if not _DNS1123_SUBDOMAIN.fullmatch(text):
        return "must be a lower-case DNS name: a-z, 0-9, '-' and '.', starting and ending with a letter or digit"
    return None


def namespace_problem(text: str) -> str | None:
    """A namespace's name: a DNS-1123 label (``team-a``)."""
    if len(text) > LABEL_MAX:
        return f"longer than {LABEL_MAX} characters"
    if not re.fullmatch(_DNS1123_LABEL, text, re.ASCII):
        return "must be a lower-case DNS label: a-z, 0-9 and '-', starting and ending with a letter or digit"
    return None


def group_problem(text: str) -> str | None:
    """An API group: empty for the core group, else a DNS subdomain (``apps``, ``cache.example.com``)."""
    return None if text == "" else dns1123_subdomain_problem(text)


def version_problem(text: str) -> str | None:
    """An API version such as ``v1`` or ``v1alpha1``: a DNS-1035 label, as CRD versions must be."""
    if len(text) > LABEL_MAX:
        return f"longer than {LABEL_MAX} characters"
    if not _DNS1035_LABEL.fullmatch(text):
        return "must be like v1 or v1alpha1: a-z, 0-9 and '-', starting with a letter"
    return None


def kind_problem(text: str) -> str | None:
    """A kind such as ``Memcached``: the API server wants a DNS-1035 label in any case (CRD names.kind)."""
    if len(text) > LABEL_MAX:
        return f"longer than {LABEL_MAX} characters"
    if not _DNS1035_LABEL.fullmatch(text.lower()):
        return "must be like Memcached: letters, digits and '-', starting with a letter"
    return None


def qualified_name_problem(text: str) -> str | None:
    """A label key or finalizer name: ``name`` or ``dns.prefix/name``, the name part at most 63 characters."""
    prefix, slash, name = text.rpartition("/")
    if slash:
        if not prefix:
            return "the prefix before '/' must not be empty"
        if "/" in prefix:
            return "at most one '/'"
        problem = dns1123_subdomain_problem(prefix)
        if problem:
            return f"prefix {prefix[:40]!r}: {problem}"
    if not name:
        return "the name part must not be empty"
    if len(name) > LABEL_MAX:
        return f"the name part is longer than {LABEL_MAX} characters"
    if not _NAME_PART.fullmatch(name):
        return "the name part must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
    return None


def label_value_problem(text: str) -> str | None:
    """A label value: empty, or up to 63 letters, digits, '-', '_' and '.' starting and ending alphanumeric."""
    if len(text) > LABEL_MAX:
        return f"longer than {LABEL_MAX} characters"
    if text and not _NAME_PART.fullmatch(text):
        return "must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
    return None
