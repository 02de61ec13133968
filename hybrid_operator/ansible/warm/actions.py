"""Action plugins loaded once, in the zygote, for every run: the builtin ones roles use most and the ones
the prepared roles name.

Where it sits: the zygote (``zygote.ZygoteServer``) calls ``preload_worker_plugins`` after its warm-up and
``preload_role_actions`` with the roles' parsed YAML (``parsed.parse``) before it resets Ansible's state and
sets its heap aside. Ansible loads a task's action plugin from its source file the first time a process
needs it (``PluginLoader`` keeps the module by path); every run is a fresh fork of the zygote, so each run
loaded the action plugins of its role again: for ``roles/foo`` six of them, ~6 ms of CPU a run
(``kubernetes.core``'s k8s and k8s_info, this project's k8s_status, k8s_event and requeue_after,
``validate_argument_spec``). Loaded here, every run finds them already imported, as the second task using
a plugin in one Ansible process does.

What is loaded is only ever what a run of these roles would load itself: a task's fully qualified action
name (``kubernetes.core.k8s``), or a short one (``k8s``) under each collection the roles list in a
``collections:`` keyword. A name that resolves to no action plugin loads nothing (most task keys are
keywords); one that fails to load is left for the runs, which report it as they always did. At most
``MAX_NAMES`` names are tried, so a roles path of thousands of tasks costs the zygote a bounded start.

``HYBRID_OPERATOR_PRELOAD_ACTIONS=0`` in the operator's environment leaves the roles' action plugins to the
runs (read by the zygote; the builtin ones are always loaded). ``tests/unit/ansible/warm/test_actions.py``
checks which names are found and that a run of the prepared role loads none of them again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

# The action plugins behind the builtin tasks roles use most. Ansible loads action plugins in its worker
# processes, one fork per task, so the warm-up playbook loading them does not help the runs that follow;
# loaded here, in the zygote itself, every worker of every run inherits them.
WORKER_ACTIONS = (
    "ansible.legacy.normal",  # every module task without an action plugin of its own
    "ansible.builtin.command",
    "ansible.builtin.debug",
    "ansible.builtin.set_fact",
    "ansible.builtin.assert",
    "ansible.builtin.fail",
    "ansible.builtin.template",
    "ansible.builtin.copy",
    "ansible.builtin.include_vars",
    "ansible.builtin.validate_argument_spec",  # a role with meta/argument_specs.yml runs it first
)
DISABLE_ENV = "HYBRID_OPERATOR_PRELOAD_ACTIONS"  # "0" in the operator's environment: the roles' are not loaded
MAX_NAMES = 500
_PART = r"[A-Za-z_][A-Za-z0-9_]*"
_FQCN = re.compile(rf"{_PART}\.{_PART}\.{_PART}")
_SHORT = re.compile(_PART)
_COLLECTION = re.compile(rf"{_PART}\.{_PART}")


def preload_worker_plugins() -> list[str]:
    """Load in this process what Ansible's workers would otherwise load for every task: the builtin Jinja2
    filters and tests (all of them, the first time any is used) and the common action plugins. What could
    not be loaded (not an error: a worker then loads it itself, as it always does)."""
    from ansible.plugins.loader import filter_loader, test_loader

    loads = [(filter_loader.get, "ansible.builtin.to_json"), (test_loader.get, "ansible.builtin.truthy")]
    return [name for load, name in loads if not _try(load, name)] + _load_actions(WORKER_ACTIONS)


def preload_role_actions(role_data: Iterable[Any]) -> tuple[int, int]:
    """Load the action plugins the tasks in ``role_data`` (parsed role files) name, as the module docstring
    says: how many names were tried and how many of them resolved to an action plugin now loaded."""
    if os.environ.get(DISABLE_ENV) == "0":
        return 0, 0
    names = action_names(role_data)
    return len(names), len(names) - len(_load_actions(names))


def action_names(role_data: Iterable[Any]) -> list[str]:
    """The fully qualified action names the parsed files may use, at most ``MAX_NAMES``: the fully qualified
    task names first, in the order found, then the short ones (not task keywords) under each collection."""
    data = list(role_data)
    collections = list(dict.fromkeys(c for doc in data for c in _collections(doc)))
    keywords = _keywords()
    full: dict[str, None] = {}
    short: dict[str, None] = {}
    for key in (k for doc in data for k in _task_keys(doc)):
        if _FQCN.fullmatch(key):
            full[key] = None
        elif collections and key not in keywords and _SHORT.fullmatch(key):
            short[key] = None
        if len(full) >= MAX_NAMES:
            break
    names = list(full) + [f"{c}.{key}" for key in short for c in collections if f"{c}.{key}" not in full]
    return names[:MAX_NAMES]


def _keywords() -> frozenset[str]:
    """The keywords of a task and a block (``name``, ``when``, ``block``...): never an action's name."""
    try:
        from ansible.playbook.block import Block
        from ansible.playbook.task import Task

        return frozenset(Task.fattributes) | frozenset(Block.fattributes)
    except Exception:  # an ansible-core without them: the names are only tried, a keyword resolves to nothing
        return frozenset()


def _task_keys(doc: Any) -> Iterator[str]:
    """Every string key of every mapping in a list, at any depth (tasks, blocks and their nested lists)."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(reversed(node))
        elif isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str):
                    yield key
                if isinstance(value, list):
                    stack.append(value)


def _collections(doc: Any) -> Iterator[str]:
    """The collection names of every ``collections:`` keyword in a parsed file (meta/main.yml, a play)."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            listed = node.get("collections")
            if isinstance(listed, list):
                yield from (c for c in listed if isinstance(c, str) and _COLLECTION.fullmatch(c))
            stack.extend(v for v in node.values() if isinstance(v, list))


def _load_actions(names: Iterable[str]) -> list[str]:
    """Load these action plugins' classes; the names that resolved to none or failed to load."""
    from ansible.plugins.loader import action_loader

    return [name for name in names if not _try(lambda n: action_loader.get(n, class_only=True), name)]


def _try(load: Any, name: str) -> bool:
    try:
        return load(name) is not None
    except Exception:
        return False
