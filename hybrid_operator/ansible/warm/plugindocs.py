"""Plugin documentation parsed once, in the zygote, for every run: the warm executor's plugin-docs memo.

Where it sits: the zygote (``zygote``) calls ``install`` before its warm-up, so the plugins the warm-up
loads (inventory sources, callbacks, connection, shell) are noted there, and every run it forks inherits the
notes. Ansible parses a plugin's ``DOCUMENTATION`` each time it loads a plugin that declares no options
(``compat.hook_plugin_docs`` says why and what is skipped); a run re-parsed five of them. The zygote also
loads the lookups roles use most (``LOOKUPS``) so their option definitions are in place before the fork.

``HYBRID_OPERATOR_PLUGIN_DOCS=0`` in the operator's environment turns this off (read by the zygote).
``tests/unit/ansible/warm/test_plugindocs.py`` checks the shape and what is parsed.
"""

from __future__ import annotations

import os

from hybrid_operator.ansible import compat

DISABLE_ENV = "HYBRID_OPERATOR_PLUGIN_DOCS"
# Lookups whose documentation each run would otherwise parse at its first use (they declare options).
LOOKUPS = ("ansible.builtin.template", "ansible.builtin.file", "ansible.builtin.env", "kubernetes.core.k8s")
WITHOUT_OPTIONS: dict[tuple[str, str, str], object] = {}
_installed: list[bool] = []


def install() -> list[str]:
    """Hook this process's plugin loaders (see the module docstring); why it could not (then each run parses
    the documentation, as before). Once per process."""
    if _installed:
        return []
    if os.environ.get(DISABLE_ENV) == "0":
        return [f"{DISABLE_ENV}=0"]
    problems = compat.plugin_docs_problems()
    if not problems:
        compat.hook_plugin_docs(WITHOUT_OPTIONS)
        _installed.append(True)
    return problems


def preload_lookups(names: tuple[str, ...] = LOOKUPS) -> list[str]:
    """Load these lookup plugins in this process; the ones that could not be loaded (not an error: a run
    loads what it uses itself)."""
    from ansible.plugins.loader import lookup_loader

    missing = []
    for name in names:
        try:
            if lookup_loader.get(name, class_only=True) is None:
                missing.append(name)
        except Exception:
            missing.append(name)
    return missing
