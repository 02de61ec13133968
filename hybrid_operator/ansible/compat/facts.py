"""No cleaning of facts a host does not have: ``VariableManager.get_vars`` without a scan of the connection
plugins for every task.

Where it sits: the zygote (``warm.zygote``) calls ``skip_cleaning_no_facts`` after its warm-up, so every run
inherits it. For every task, ``get_vars`` passes the host's facts through ``ansible.vars.clean.clean_facts``
(by the name ``ansible.vars.manager`` imported it under), which deep-copies them and then, to find the keys
to drop, lists every connection plugin file on the plugin paths (``connection_loader.all``: a ``glob`` per
path) and compiles a pattern per plugin, before it looks at a single key. An operator's runs gather no facts:
the host has none, and all of that work ends in ``{}``. Given no facts, the hook answers ``{}`` at once (a new
dict, as ``clean_facts`` returns); any other value goes to ``clean_facts`` unchanged. Nothing else sees a
difference: listing the plugins leaves nothing behind that a later lookup would not make the same way.
The same name and behaviour in 2.18-2.21; ``no_facts_problems`` checks both before the hook goes in.
``HYBRID_OPERATOR_FACTS_HOOK=0`` in the operator's environment leaves it out (read by the zygote).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


def no_facts_problems(switch: str) -> list[str]:
    """Why ``skip_cleaning_no_facts`` is not to be installed: the environment variable ``switch`` is ``0``, or
    this ansible-core's shape is not the expected one (empty: it can be)."""
    if os.environ.get(switch) == "0":
        return [f"{switch}=0"]
    try:
        from ansible.vars import manager

        clean = getattr(manager, "clean_facts", None)
        if not callable(clean):
            return ["ansible.vars.manager.clean_facts: not found"]
        given: dict[str, Any] = {}
        cleaned = clean(given)
        if type(cleaned) is not dict or cleaned or cleaned is given:
            return [f"ansible.vars.manager.clean_facts({{}}): {cleaned!r}, not a new empty dict"]
    except Exception as exc:
        return [f"{type(exc).__name__}: {exc}"]
    return []


def skip_cleaning_no_facts() -> Callable[[Any], Any]:
    """Install the hook (see the module docstring; check ``no_facts_problems`` first); the original."""
    from ansible.vars import manager

    original: Callable[[Any], Any] = manager.clean_facts

    def clean_facts(facts: Any) -> Any:
        if type(facts) is dict and not facts:
            return {}
        return original(facts)

    manager.clean_facts = clean_facts
    return original
