"""Which ansible-core the warm path was written for: the tested range, and the gate that checks it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypeVar

SUPPORTED = ((2, 18), (2, 22))  # ansible-core: >= first, < second (pyproject.toml pins the same)
# Set to 1, a newer ansible-core than the tested range is tried anyway: the shape checks and the start-up
# self-test still decide (CI's canary does this with the newest release, to see what it moved).
UNTESTED_ENV = "HYBRID_OPERATOR_WARM_UNTESTED_ANSIBLE"
FINDER_WARNING = "AnsibleCollectionFinder has already been configured"  # a fork configures it again


T = TypeVar("T")


class UnsupportedAnsible(RuntimeError):
    """This ansible-core is outside the tested range, or keeps its private state elsewhere."""


def ansible_version() -> tuple[int, int, str]:
    from ansible.release import __version__  # light: does not load Ansible's configuration

    major, minor = (int(part) for part in __version__.split(".")[:2])
    return major, minor, __version__


def check_version() -> str:
    major, minor, full = ansible_version()
    low, high = SUPPORTED
    if (major, minor) >= high and os.environ.get(UNTESTED_ENV) == "1":
        return full
    if not low <= (major, minor) < high:
        raise UnsupportedAnsible(
            f"ansible-core {full} is not supported by the warm executor (it needs >={low[0]}.{low[1]},"
            f"<{high[0]}.{high[1]}); install a supported ansible-core or use the runner executor"
        )
    return full


def per_minor(table: Mapping[tuple[int, int], T], version: tuple[int, int] | None = None) -> T:
    """The entry of a per-minor table for the installed ansible-core (or ``version``): the one of the newest
    minor at or below it. A table's first entry is the oldest minor it knows, ``SUPPORTED[0]`` or later."""
    if version is None:
        major, minor, _full = ansible_version()
        version = (major, minor)
    known = [v for v in table if v <= version]
    return table[max(known) if known else min(table)]
