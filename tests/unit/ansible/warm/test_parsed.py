"""The parsed-file cache (``warm.parsed``, ``compat.loading``): the shape it relies on, that role loading gets
what Ansible's own parse gives, that callers get copies, and that an edited, replaced or removed file is read
again. The hook changes ``DataLoader`` for the whole process, so those checks run in a child interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import compat
from tests.unit.ansible.warm.speedups import OFF_HERE

_CHILD = r"""
import json, os, sys, time
from ansible.parsing.dataloader import DataLoader
from hybrid_operator.ansible.warm import parsed

path, other = sys.argv[1], sys.argv[2]
assert parsed.install() == []
cache = parsed.PARSED[0]
parsed.parse([__import__("pathlib").Path(p) for p in (path, other)])
out = {"parsed": len(cache)}

def load(name=path, **kwargs):
    return DataLoader().load_from_file(name, trusted_as_template=True, **kwargs)

first = load()
first[0]["name"] = "changed by a caller"
out["served"] = [load(), cache.hits]
out["unsafe"] = [load(unsafe=True), cache.hits]  # Ansible's own path: never the shared original
out["plain"] = [DataLoader().load_from_file(path), cache.hits]  # not trusted as templates: Ansible's path

with open(path, "r+", encoding="utf-8") as handle:  # an edit in place, same size
    text = handle.read()
    handle.seek(0)
    handle.write(text.replace("one", "two"))
out["edited"] = [load(), cache.hits, cache.stale]
os.replace(other, path)  # a replacement
out["replaced"] = [load(), cache.hits, cache.stale]
os.remove(path)
try:
    load()
except Exception as exc:
    out["removed"] = type(exc).__name__
print(json.dumps(out))
"""

pytestmark = pytest.mark.skipif(
    OFF_HERE, reason="the parsed-file cache is off on this ansible-core (test_speedups_off.py)"
)


def test_the_installed_ansible_core_has_the_shape() -> None:
    assert compat.loader_hook_problems() == []


def test_role_loading_is_served_until_the_file_changes(tmp_path: Path) -> None:
    path, other = tmp_path / "main.yml", tmp_path / "other.yml"
    path.write_text("- name: task one\n  ansible.builtin.debug:\n    msg: '{{ x }}'\n", encoding="utf-8")
    other.write_text("- name: another task\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-P", "-c", _CHILD, str(path), str(other)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    task = {"name": "task one", "ansible.builtin.debug": {"msg": "{{ x }}"}}
    assert out["parsed"] == 2
    assert out["served"] == [[task], 2]  # a copy each time: the first caller's change is not in the second's
    assert out["unsafe"] == [[task], 2] and out["plain"] == [[task], 2]
    assert out["edited"] == [[{**task, "name": "task two"}], 2, 1]
    assert out["replaced"] == [[{"name": "another task"}], 2, 2]
    assert out["removed"] == "AnsibleFileNotFound"


def test_what_cannot_be_parsed_ahead_is_left_to_the_runs(tmp_path: Path) -> None:
    broken, vaulted, good = tmp_path / "broken.yml", tmp_path / "vaulted.yml", tmp_path / "good.yml"
    broken.write_text("- name: [unclosed\n", encoding="utf-8")
    vaulted.write_text("$ANSIBLE_VAULT;1.1;AES256\n3132\n", encoding="utf-8")
    good.write_text("a: 1\n", encoding="utf-8")
    parsed = compat.ParsedFiles()
    compat.parse_ahead([str(broken), str(vaulted), str(good), str(tmp_path / "missing.yml")], parsed)
    assert len(parsed) == 1 and parsed.get(str(good)) == {"a": 1}
    assert parsed.get(str(broken)) is None and parsed.hits == 1
