"""The plugin-docs memo (``warm.plugindocs``, ``compat.plugindocs``): the loader is the shape the hook expects on
every supported ansible-core, a plugin without options has its documentation parsed once however often it is
loaded, one with options and one loaded anew are parsed as Ansible always did, and the configuration Ansible
ends up with is the same with and without the memo. The hook is process-wide, so it runs in a child."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hybrid_operator.ansible import compat

_CHILD = r"""
import json, sys, types
from ansible import constants as C
from ansible.plugins import loader

parsed = []
real = loader.PluginLoader._load_config_defs

def counting(self, name, module, path):  # what the memo calls when it does not skip: the real parse
    parsed.append(name)
    return real(self, name, module, path)

counting.__wrapped__ = real  # the memo's shape check reads the real method through it
loader.PluginLoader._load_config_defs = counting
if sys.argv[1] == "memo":
    from hybrid_operator.ansible.warm import plugindocs
    assert plugindocs.install() == [], "not installed"
    assert plugindocs.install() == [], "a second install is a no-op"

for _ in range(3):
    loader.inventory_loader.get("host_list")
    loader.callback_loader.get("oneline", class_only=True)
    loader.lookup_loader.get("template", class_only=True)  # no collection finder in this process: legacy name

# The same path with a module loaded anew (another plugin file there): parsed again.
cached = next(p for p in loader.callback_loader._module_cache if p.endswith("oneline.py"))
old = loader.callback_loader._module_cache[cached]
fresh = types.ModuleType(old.__name__)
fresh.__dict__.update(vars(old))
fresh.DOCUMENTATION = "name: oneline\noptions:\n  marker:\n    description: new\n    default: x\n"
loader.callback_loader._module_cache[cached] = fresh
loader.callback_loader.get("oneline", class_only=True)

print(json.dumps({
    "parsed": parsed,
    "oneline_options": sorted(C.config.get_configuration_definitions("callback", "oneline")),
    "template_options": sorted(C.config.get_configuration_definitions("lookup", "template")),
}))
"""


def _child(mode: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "HYBRID_OPERATOR_PLUGIN_DOCS"}
    command = [sys.executable, "-P", "-c", _CHILD, mode]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_installed_ansible_core_has_the_shape() -> None:
    assert compat.plugin_docs_problems() == []


def test_documentation_without_options_is_parsed_once_and_the_configuration_is_unchanged() -> None:
    plain, memo = _child("plain"), _child("memo")
    plain_parsed = plain["parsed"]
    memo_parsed = memo["parsed"]
    assert isinstance(plain_parsed, list) and isinstance(memo_parsed, list)
    # Without the memo, every load of the option-less plugins parses again (3 rounds + the new module).
    assert plain_parsed.count("host_list") == 3
    assert plain_parsed.count("oneline") == 4
    # With it: once per module object; the new module at the same path is parsed (and its options kept).
    assert memo_parsed.count("host_list") == 1
    assert memo_parsed.count("oneline") == 2
    # A plugin with options goes to Ansible's own check on every load, as before (which parses it once).
    assert plain_parsed.count("template") == memo_parsed.count("template") == 3
    assert plain["oneline_options"] == memo["oneline_options"] == ["marker"]
    assert plain["template_options"] == memo["template_options"] != []


def test_the_switch_turns_it_off() -> None:
    done = subprocess.run(
        [sys.executable, "-P", "-c", "from hybrid_operator.ansible.warm import plugindocs as p; print(p.install())"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HYBRID_OPERATOR_PLUGIN_DOCS": "0"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['HYBRID_OPERATOR_PLUGIN_DOCS=0']"
