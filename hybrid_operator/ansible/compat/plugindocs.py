"""Plugin documentation read once (``warm.plugindocs``): ``PluginLoader._load_config_defs`` skipped for a plugin
whose documentation the zygote already found to declare no options. Same in 2.18-2.21;
``plugin_docs_problems`` checks the shape before ``hook_plugin_docs``.

Why: when Ansible loads a configurable plugin (callback, connection, inventory, lookup, shell, become...) it
parses the plugin's ``DOCUMENTATION`` YAML to register its options, unless the configuration manager already
has a definition for it. A plugin that declares no options never gets one, so its documentation is parsed
again on every load: the ``host_list``, ``auto``, ``ini`` and ``toml`` inventory plugins and the ``oneline``
callback, five YAML parses in every run (~5 ms of a Foo run), although the zygote had parsed them all during
its warm-up. The answer depends only on the plugin module's ``DOCUMENTATION``, which is the same string object
as long as the loader keeps the same module object; a plugin whose module was loaded anew (another file at
that path, another run's role) is parsed as before. Plugins that do declare options are left alone: their
definitions already stay in the configuration manager, so Ansible skips them itself.
"""

from __future__ import annotations

import inspect
from typing import Any

_SOURCE_LINE = "not C.config.has_configuration_definition(type_name, name)"


def plugin_docs_problems() -> list[str]:
    """Why ``hook_plugin_docs`` cannot be installed on this ansible-core (empty: it can)."""
    try:
        from ansible import constants
        from ansible.plugins import loader

        method = loader.PluginLoader._load_config_defs
        problems = []
        if tuple(inspect.signature(method).parameters) != ("self", "name", "module", "path"):
            problems.append("PluginLoader._load_config_defs: not the expected parameters")
        if _SOURCE_LINE not in inspect.getsource(method):
            problems.append(f"PluginLoader._load_config_defs: no {_SOURCE_LINE}")
        if not callable(getattr(loader, "get_plugin_class", None)):
            problems.append("ansible.plugins.loader.get_plugin_class: not found")
        if not callable(getattr(constants.config, "has_configuration_definition", None)):
            problems.append("ConfigManager.has_configuration_definition: not found")
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def hook_plugin_docs(without_options: dict[tuple[str, str, str], object]) -> None:
    """Remember in ``without_options`` each (plugin type, name, path) whose documentation defined no options,
    with the documentation it had, and skip parsing it again while the module still has that same string."""
    from ansible import constants
    from ansible.plugins import loader

    original = loader.PluginLoader._load_config_defs

    def _load_config_defs(self: Any, name: str, module: Any, path: str) -> None:
        if not self.class_name:
            original(self, name, module, path)
            return
        key = (loader.get_plugin_class(self.class_name), str(name), str(path))
        documentation = getattr(module, "DOCUMENTATION", "")
        if key in without_options and without_options[key] is documentation:
            return
        original(self, name, module, path)
        if not constants.config.has_configuration_definition(key[0], name):
            without_options[key] = documentation

    loader.PluginLoader._load_config_defs = _load_config_defs
