"""No rewrite of a host's fact cache file a ``set_fact`` saves unchanged (``compat.factcache``): the shape it
relies on, and a real playbook run with and without it: the same output and the same fact cache files, with
fewer writes. The hook changes ``VariableManager`` for the whole process, so each run is a new interpreter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.compat.versions import ansible_version
from tests.unit.ansible.warm.playbooks import run_playbook

SWITCH = "HYBRID_OPERATOR_FACT_CACHE_HOOK"
BEFORE_2_21 = ansible_version()[:2] < (2, 21)

# Non-cacheable set_facts before any cacheable fact (no entry yet: Ansible's path writes the first, empty,
# file), cacheable ones between them, a set_fact in a loop, a registered result and facts read back.
_PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact: {a: 1}
    - ansible.builtin.set_fact: {a: 2, nested: {x: [1, 2]}}
    - ansible.builtin.set_fact: {b: "{{ a + 1 }}", cacheable: true}
    - ansible.builtin.set_fact: {c: "{{ item }}"}
      loop: [1, 2, 3]
    - ansible.builtin.command: echo hi
      register: echoed
      changed_when: false
    - ansible.builtin.set_fact: {d: "{{ echoed.stdout }}", cacheable: true}
    - ansible.builtin.set_fact: {a: 3}
    - ansible.builtin.debug:
        msg: "{{ a }} {{ b }} {{ c }} {{ d }} {{ nested }} {{ ansible_facts | to_json }}"
"""

_COUNTERS = """
def install_counters(counts, workdir):
    from ansible.plugins.cache import BaseFileCacheModule
    original = BaseFileCacheModule.set
    counts["writes"] = 0
    def set(self, key, value):
        counts["writes"] += 1
        return original(self, key, value)
    BaseFileCacheModule.set = set  # in the strategy: in the child itself


def finish_counters(counts, workdir):
    pass
"""


def _run(tmp_path: Path, mode: str) -> dict[str, Any]:
    return run_playbook(tmp_path / mode, mode, "unchanged_fact_write", {"play.yml": _PLAY}, _COUNTERS)


@pytest.mark.skipif(BEFORE_2_21, reason="before 2.21 set_fact saves the fact cache only for cacheable facts")
def test_the_installed_ansible_core_has_the_shape() -> None:
    assert compat.unchanged_fact_write_problems(SWITCH) == []


@pytest.mark.skipif(not BEFORE_2_21, reason="2.21 and later: the hook goes in")
def test_before_2_21_it_says_why_not() -> None:
    assert "only for cacheable facts" in compat.unchanged_fact_write_problems(SWITCH)[0]


def test_the_switch_leaves_it_out(monkeypatch: Any) -> None:
    monkeypatch.setenv(SWITCH, "0")
    assert compat.unchanged_fact_write_problems(SWITCH) == [f"{SWITCH}=0"]


@pytest.mark.skipif(BEFORE_2_21, reason="before 2.21 set_fact saves the fact cache only for cacheable facts")
def test_a_playbook_gives_the_same_output_and_fact_cache_with_fewer_writes(tmp_path: Path) -> None:
    plain, hooked = _run(tmp_path, "plain"), _run(tmp_path, "hooked")
    assert plain["rc"] == hooked["rc"] == 0, plain["stdout"]
    assert hooked["stdout"] == plain["stdout"]
    assert hooked["fact_cache"] == plain["fact_cache"]
    assert list(plain["fact_cache"]) == ["s1_localhost"]
    assert '\\"b\\": {\\"value\\": 3' in plain["fact_cache"]["s1_localhost"]  # the cacheable facts are saved
    assert '"msg": "3 3 3 hi' in plain["stdout"]
    # Ansible's path saved the file for every set_fact result (the loop's three items and its own result
    # among them): 9 writes; with the hook, the first (which makes the host's entry) and the two cacheable.
    assert (plain["counts"]["writes"], hooked["counts"]["writes"]) == (9, 3)
    assert hooked["counts"]["writes"] == 3
