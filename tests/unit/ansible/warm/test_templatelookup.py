"""``lookup('template')`` over a new dict of the same variables instead of a deep copy of them
(``compat.templatelookup``): the shape it relies on, and a real playbook run with and without it, whose
templates try to change the variables they read: the same output, and the variables unchanged in both. The
hook changes the lookup's module for the whole process, so each run is a new interpreter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import compat
from tests.unit.ansible.warm.playbooks import run_playbook
from tests.unit.ansible.warm.speedups import OFF_HERE, in_child

SWITCH = "HYBRID_OPERATOR_TEMPLATE_LOOKUP_HOOK"

_PLAY = """
- hosts: localhost
  gather_facts: false
  vars:
    numbers: [1, 2]
    nested: {a: [1], b: {}}
    derived: "{{ numbers | length }}"
  tasks:
    - ansible.builtin.set_fact:
        rendered: "{{ lookup('ansible.builtin.template', 'change.j2') }}"
        fact: {deep: [1]}
    - ansible.builtin.debug: {msg: "{{ rendered }} | {{ numbers }} {{ nested }}"}
    - ansible.builtin.debug:
        msg: "{{ lookup('ansible.builtin.template', 'change.j2', template_vars={'extra': 'E', 'numbers': [7]}) }}"
    - ansible.builtin.debug:
        msg: "{{ lookup('ansible.builtin.template', 'facts.j2') }}"
    - ansible.builtin.debug: {msg: "{{ numbers }} {{ nested }} {{ fact }} {{ derived }}"}
"""
_CHANGE = (
    "{{ numbers.append(3) }}{{ nested.a.append(9) }}{{ nested.update({'z': 1}) }}{{ nested.b.update({'w': 2}) }}"
    "{{ numbers }} {{ nested }} {{ derived }} {{ template_path | basename }} {{ extra | default('none') }}"
    " {{ ansible_managed is defined }}\n"
)
_FACTS = "{{ fact.deep.append(2) }}{{ fact }} {{ rendered | length }} {{ hostvars['localhost']['fact'] }}\n"

_COUNTERS = """
import json, os

def install_counters(counts, workdir):
    from hybrid_operator.ansible.compat import templatelookup
    module = templatelookup._lookup_module()
    copy = module.__dict__["deepcopy"]
    def deepcopy(value, memo=None):  # runs in the task's worker, a fork: one line per copy to a file
        copied = copy(value, memo)
        shared = sum(1 for k in value if copied[k] is value[k] and isinstance(value[k], (list, dict)))
        with open(os.path.join(workdir, "copies"), "a") as log:
            log.write(json.dumps(shared) + "\\n")
        return copied
    module.__dict__["deepcopy"] = deepcopy

def finish_counters(counts, workdir):
    shared = [json.loads(line) for line in open(os.path.join(workdir, "copies"))]
    counts["copies"], counts["shared values"] = len(shared), sum(shared)
"""


def _run(tmp_path: Path, mode: str) -> dict[str, Any]:
    files = {"play.yml": _PLAY, "templates/change.j2": _CHANGE, "templates/facts.j2": _FACTS}
    return run_playbook(tmp_path / mode, mode, "template_lookup", files, _COUNTERS)


@pytest.mark.skipif(OFF_HERE, reason="2.18: a template can change the variables it reads")
def test_the_installed_ansible_core_has_the_shape() -> None:
    script = (
        "import json; from ansible.plugins.loader import init_plugin_loader; init_plugin_loader(); "
        "from hybrid_operator.ansible import compat; print(json.dumps(compat.template_lookup_problems('UNSET')))"
    )
    assert in_child(script) == []  # the plugin loader initialized, as in the zygote


@pytest.mark.skipif(not OFF_HERE, reason="2.19 and later: the hook goes in")
def test_on_2_18_it_says_why_not() -> None:
    assert "can change the variables" in compat.template_lookup_problems(SWITCH)[0]


def test_the_switch_leaves_it_out(monkeypatch: Any) -> None:
    monkeypatch.setenv(SWITCH, "0")
    assert compat.template_lookup_problems(SWITCH) == [f"{SWITCH}=0"]


@pytest.mark.skipif(OFF_HERE, reason="2.18: a template can change the variables it reads")
def test_templates_that_change_what_they_read_give_the_same_output_and_leave_the_variables(tmp_path: Path) -> None:
    plain, hooked = _run(tmp_path, "plain"), _run(tmp_path, "hooked")
    assert plain["rc"] == hooked["rc"] == 0, plain["stdout"]
    assert hooked["stdout"] == plain["stdout"]
    assert "[1, 2, 3] {'a': [1, 9], 'b': {'w': 2}, 'z': 1} 2 change.j2 none True" in plain["stdout"]
    assert "[7, 3]" in plain["stdout"] and " E True" in plain["stdout"]  # template_vars over the variables
    # After every template changed what it read, the variables are what the play set.
    assert "[1, 2] {'a': [1], 'b': {}} {'deep': [1]} 2" in plain["stdout"]
    assert plain["counts"]["copies"] == hooked["counts"]["copies"] == 3
    assert plain["counts"]["shared values"] == 0  # deep copies
    assert hooked["counts"]["shared values"] > 0  # a new dict over the same values
