"""The variable names a custom resource's spec may not set, taken from the installed ansible-core.

Called once by ``inputdir.refused_spec_names`` (through ``reserved_names``), which the reconciler asks
before every run. Every spec key becomes a top-level extra var, the highest precedence Ansible has, so
a spec key named like one of Ansible's own settings (``ansible_shell_executable``,
``ansible_ssh_common_args``) is code execution, and one named like a magic variable or template global
(``omit``, ``hostvars``, ``lookup``) changes what the role means. The names come from ansible-core
itself: its connection/become/shell variable mapping, the magic variables its VariableManager gives a
play, the globals of its template environment and its template keywords. They are read in a
short-lived child process: importing that much of Ansible would cost the long-running operator tens of
megabytes for one set of strings.

Not refused, on purpose: the play and task keywords of ``ansible.vars.reserved`` (``name``, ``port``,
``timeout``, ``action``...). Ansible only warns about variables with those names and never reads them as
settings (its settings are the ``ansible_*`` names), while real custom resources, our own
VirtualMachine among them, have spec fields called that.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading

from hybrid_operator.ansible import compat

log = logging.getLogger(__name__)

# Per-task magic variables that no play-level source lists (the rest come from ansible-core).
_TASK_MAGIC = frozenset({"hostvars", "role_name", "role_path", "role_uuid", "item"})

# Each source is tried on its own: a source that moved in a newer ansible-core is reported and skipped,
# the others still count (and every ``ansible_*`` and ``_*`` name is refused whatever the sources say).
_PROBE = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
names, missing = set(), []
def source(name, get):
    try:
        names.update(str(n) for n in get())
    except Exception as exc:
        missing.append(f"{name}: {exc!r}")
def connection_vars():
    from ansible import constants as C
    return [n for aliases in C.MAGIC_VARIABLE_MAPPING.values() for n in aliases]
def magic():
    from ansible import context
    from ansible.module_utils.common.collections import ImmutableDict
    from ansible.parsing.dataloader import DataLoader
    from ansible.inventory.manager import InventoryManager
    from ansible.vars.manager import VariableManager
    from ansible.playbook.play import Play
    context.CLIARGS = ImmutableDict({})
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources="localhost,")
    manager = VariableManager(loader=loader, inventory=inventory)
    play = Play.load({"hosts": "localhost", "gather_facts": False}, variable_manager=manager, loader=loader)
    return manager.get_vars(play=play, host=inventory.get_host("localhost"), include_hostvars=True)
def template_globals():
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    return Templar(DataLoader()).environment.globals
def template_keywords():  # a private name of ansible-core: where it is, is compat.TEMPLATE_KEYWORDS
    import importlib
    return getattr(importlib.import_module(sys.argv[1]), sys.argv[2])
for item in (connection_vars, magic, template_globals, template_keywords):
    source(item.__name__, item)
json.dump({"names": sorted(names), "missing": missing}, sys.stdout)
"""

_lock = threading.Lock()
_cached: frozenset[str] | None = None


def reserved_names() -> frozenset[str]:
    """Ansible's own variable names (computed once per process, in a child process)."""
    global _cached
    with _lock:
        if _cached is None:
            _cached = _probe()
        return _cached


def _probe() -> frozenset[str]:
    env = {**os.environ, "ANSIBLE_DEPRECATION_WARNINGS": "false", "ANSIBLE_NOCOLOR": "true"}
    try:
        done = subprocess.run(
            [sys.executable, "-P", "-c", _PROBE, *compat.TEMPLATE_KEYWORDS],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=True,
        )
        found = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        # Without the list the prefix rules still hold (every ansible_* and _* name is refused).
        log.error("could not read Ansible's reserved variable names; refusing only ansible_* and _* names: %s", exc)
        return _TASK_MAGIC
    for problem in found.get("missing", []):
        log.warning("a source of Ansible's reserved variable names is unavailable: %s", problem)
    return frozenset(found.get("names", [])) | _TASK_MAGIC
