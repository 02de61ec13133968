"""No rewrite of a host's fact cache file that a ``set_fact`` leaves as it was.

Where it sits: the zygote (``warm.zygote``) calls ``skip_unchanged_fact_writes`` after its warm-up, so every
run inherits it. Since ansible-core 2.21 every ``set_fact`` without ``cacheable`` (nearly all of them: an
operator role's ``set_fact`` keeps state for the rest of the run) also registers an empty layer of cacheable
facts, "to disable the legacy behaviour" (``ansible/plugins/action/set_fact.py``), and the strategy hands it
to ``VariableManager.set_host_facts``. That merges nothing into the host's cached facts and then saves them
all again: with the ``jsonfile`` cache ansible-runner configures (the run's ``artifacts/.../fact_cache``), the
facts are decoded, encoded again and written to a new temporary file that is renamed over the old one, with a
``chmod``: a file write for every ``set_fact`` of a run, the same bytes each time (a heavy role's run: 162).

Given an empty mapping for a host whose entry the file-backed cache plugin already holds in memory (this
process wrote it or read it) and whose file is there, the hook returns: the entry and its file are exactly
what the save would have left. Anything else (facts to merge, a first entry, another cache plugin, an entry
not in memory) takes Ansible's own ``set_host_facts``. ``HYBRID_OPERATOR_FACT_CACHE_HOOK=0`` in the
operator's environment leaves it out (read by the zygote). On 2.18-2.20 ``set_fact`` registers no empty
layer, and the hook is not installed (``unchanged_fact_write_problems`` says so).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from hybrid_operator.ansible.compat.versions import ansible_version

_FIRST = (2, 21)  # the first minor whose set_fact registers an empty cacheable layer


def unchanged_fact_write_problems(switch: str) -> list[str]:
    """Why ``skip_unchanged_fact_writes`` is not to be installed: the environment variable ``switch`` is
    ``0``, this minor's ``set_fact`` saves nothing it did not change, or the shape is not the expected one."""
    if os.environ.get(switch) == "0":
        return [f"{switch}=0"]
    major, minor, full = ansible_version()
    if (major, minor) < _FIRST:
        return [f"ansible-core {full}: set_fact saves the fact cache only for cacheable facts"]
    try:
        import inspect

        from ansible._internal._plugins._cache import PluginInterposer
        from ansible.plugins.cache import BaseFileCacheModule
        from ansible.vars.manager import VariableManager

        problems = []
        if tuple(inspect.signature(VariableManager.set_host_facts).parameters) != ("self", "host", "facts"):
            problems.append("VariableManager.set_host_facts: not (self, host, facts)")
        source = inspect.getsource(VariableManager.set_host_facts)
        for line in ("host_cache |= facts", "self._fact_cache.set(host, host_cache)"):
            if line not in source:
                problems.append(f"VariableManager.set_host_facts: no {line!r}")
        if not callable(getattr(PluginInterposer, "_get_key", None)):
            problems.append("PluginInterposer._get_key: not found")
        if not callable(getattr(BaseFileCacheModule, "_get_cache_file_name", None)):
            problems.append("BaseFileCacheModule._get_cache_file_name: not found")
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def _saved_as_is(cache: Any, host: Any, interposer: Any, file_cache: Any) -> bool:
    """Whether ``cache`` (a ``VariableManager``'s fact cache: Ansible's ``interposer`` over a ``file_cache``
    plugin) holds ``host``'s entry in memory, in a file that is there: saving it again would write what the
    file holds."""
    if type(cache) is not interposer:
        return False
    plugin = cache.__wrapped__
    if not isinstance(plugin, file_cache):
        return False
    key = cache._get_key(host)
    memory = getattr(plugin, "_cache", None)
    return isinstance(memory, dict) and key in memory and os.path.isfile(plugin._get_cache_file_name(key))


def skip_unchanged_fact_writes() -> Callable[..., Any]:
    """Install the hook (see the module docstring; check ``unchanged_fact_write_problems`` first); the
    original method."""
    from ansible._internal._plugins._cache import PluginInterposer
    from ansible.plugins.cache import BaseFileCacheModule
    from ansible.vars.manager import VariableManager

    original: Callable[..., Any] = VariableManager.set_host_facts

    def set_host_facts(self: Any, host: Any, facts: Any) -> Any:  # every set_fact: nothing imported here
        if (
            type(facts) is dict
            and not facts
            and _saved_as_is(self._fact_cache, host, PluginInterposer, BaseFileCacheModule)
        ):
            return None
        return original(self, host, facts)

    VariableManager.set_host_facts = set_host_facts
    return original
