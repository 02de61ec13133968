"""Shared copies (``warm.copies``, ``compat.datatag``): the tagged scalar classes are where they are expected, and
a deep copy then shares tagged scalars (tags included) while still copying the containers around them. The
change is process-wide, so it is checked in a child interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hybrid_operator.ansible import compat
from tests.unit.ansible.warm.speedups import OFF_HERE

pytestmark = pytest.mark.skipif(OFF_HERE, reason="shared copies are off on this ansible-core (test_speedups_off.py)")

_CHILD = r"""
import copy, datetime, json, sys
from ansible._internal._datatag._tags import Origin, TrustedAsTemplate
from ansible.module_utils._internal._datatag import AnsibleTagHelper
from hybrid_operator.ansible.warm import copies

if sys.argv[1] == "shared":
    assert copies.install() == []
origin = Origin(path="/roles/x/tasks/main.yml", line_num=3)
values = [
    TrustedAsTemplate().tag(origin.tag("{{ a }}")),
    origin.tag(b"bytes"),
    origin.tag(42),
    origin.tag(1.5),
    origin.tag(datetime.date(2026, 1, 2)),
]
data = origin.tag({"list": origin.tag([values[0], {"k": values[2]}]), "values": values})
copied = copy.deepcopy(data)
out = {
    "equal": copied == data,
    "containers_new": [copied is not data, copied["list"] is not data["list"],
        copied["list"][1] is not data["list"][1]],
    "scalars_same": [c is v for c, v in zip(copied["values"], values)],
    "tags_kept": [AnsibleTagHelper.tags(c) == AnsibleTagHelper.tags(v) for c, v in zip(copied["values"], values)],
    "container_tags_kept": AnsibleTagHelper.tags(copied["list"]) == AnsibleTagHelper.tags(data["list"]),
}
print(json.dumps(out))
"""


def _child(mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-P", "-c", _CHILD, mode], capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_installed_ansible_core_has_the_shape() -> None:
    assert compat.datatag_problems() == []


def test_a_deep_copy_shares_tagged_scalars_and_copies_containers() -> None:
    shared, rebuilt = _child("shared"), _child("rebuilt")
    for result in (shared, rebuilt):
        assert result["equal"] is True and result["containers_new"] == [True, True, True]
        assert result["tags_kept"] == [True] * 5 and result["container_tags_kept"] is True
    assert shared["scalars_same"] == [True] * 5
    assert rebuilt["scalars_same"] == [False] * 5  # Ansible's own deepcopy rebuilds them
