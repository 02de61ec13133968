"""The zygote's answer to ``get_vars`` cleaning facts a host does not have (``compat.facts``): the shape it
relies on, that a task's variables are the same with and without it, with facts and without, and that
without facts no connection plugin is listed any more. The hook changes ``ansible.vars.manager`` for the
whole process, so the comparison runs in a child interpreter, once without and once with the hook."""

from __future__ import annotations

from typing import Any

from hybrid_operator.ansible import compat
from tests.unit.ansible.warm.speedups import in_child

SWITCH = "HYBRID_OPERATOR_FACTS_HOOK"

_CHILD = r"""
import json, sys
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play import Play
from ansible.plugins.loader import connection_loader, init_plugin_loader
from ansible.vars.manager import VariableManager
from hybrid_operator.ansible import compat

init_plugin_loader()
if sys.argv[1] == "hooked":
    assert compat.no_facts_problems("UNSET_SWITCH") == []
    compat.skip_cleaning_no_facts()
listed = []
original_all = connection_loader.all
def counting_all(*args, **kwargs):
    listed.append(1)
    return original_all(*args, **kwargs)
connection_loader.all = counting_all

loader = DataLoader()
inventory = InventoryManager(loader=loader, sources="localhost,")
manager = VariableManager(loader=loader, inventory=inventory)
manager._extra_vars = {"from_extra": "e"}  # what -e gives a run
play = Play.load(
    {"hosts": "localhost", "gather_facts": False, "vars": {"from_play": 1},
     "tasks": [{"name": "t", "ansible.builtin.debug": {"msg": "x"}, "vars": {"from_task": [1, 2]}}]},
    variable_manager=manager, loader=loader,
)
task = play.get_tasks()[0][0]
host = inventory.get_host("localhost")

def variables():
    found = manager.get_vars(play=play, host=host, task=task)
    keep = ("from_extra", "from_play", "from_task", "ansible_facts", "x", "ansible_ssh_pass", "inventory_hostname")
    return {k: found.get(k, "<absent>") for k in keep}, sorted(found)

out = {}
out["no facts"], out["no facts keys"] = variables()
out["listed without facts"] = len(listed)
manager.set_host_facts("localhost", {"x": 2, "ansible_ssh_pass": "never", "ansible_local": {}})
out["facts"], out["facts keys"] = variables()
out["listed with facts"] = len(listed) > out["listed without facts"]
print(json.dumps(out, default=str))
"""


def _child(mode: str) -> dict[str, Any]:
    out: dict[str, Any] = in_child(_CHILD, mode, env={"ANSIBLE_NOCOLOR": "1"})
    return out


def test_the_installed_ansible_core_has_the_shape() -> None:
    assert compat.no_facts_problems(SWITCH) == []


def test_the_switch_leaves_it_out(monkeypatch: Any) -> None:
    monkeypatch.setenv(SWITCH, "0")
    assert compat.no_facts_problems(SWITCH) == [f"{SWITCH}=0"]


def test_a_tasks_variables_are_the_same_with_the_hook_and_no_plugin_is_listed_for_no_facts() -> None:
    plain, hooked = _child("plain"), _child("hooked")
    assert plain["listed without facts"] > 0  # what the hook saves: a listing of the plugins per task
    assert hooked["listed without facts"] == 0
    for key in ("no facts", "no facts keys", "facts", "facts keys"):
        assert hooked[key] == plain[key], key
    assert plain["no facts"]["from_task"] == [1, 2]
    assert plain["facts"]["x"] == 2  # facts still reach the variables, cleaned as Ansible cleans them
    assert plain["facts"]["ansible_ssh_pass"] == "<absent>"  # a connection variable from facts is dropped
    assert hooked["listed with facts"]  # with facts, Ansible's own cleaning runs
