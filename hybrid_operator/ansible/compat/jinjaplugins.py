"""Jinja's own filters and tests found at once (``warm.templates``): ``Jinja2Loader.get_with_context`` told, for the
names the zygote looked up once, that ``ansible.builtin`` has no plugin of that name. Same in 2.19-2.21;
``jinja_lookup_problems`` checks the shape before ``hook_jinja_lookups``.

Why: every template environment (a new one for most templating Ansible does) asks the filter or test loader
for each name its templates use before it falls back to Jinja's builtins (``JinjaPluginIntercept``). For a
name Ansible has no plugin of (``length``, ``list``, ``map``, ``join``, ``selectattr``, ``lower``...) the loader
imports and lists every module of ``ansible.builtin``'s filter or test package, builds each one's map of
functions, finds nothing, and keeps no note of it: ~60 such searches in a Foo run, 10% of its CPU. The answer
only depends on ``ansible.builtin``'s own files and routing, which do not change while the process lives;
plugins a role or a collection adds are found first, as before (the loader's non-collection wrappers, which it
rebuilds when its paths change, are still asked first), and names with a collection are not touched.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

_SOURCE_LINES = ("name = name.removeprefix('ansible.legacy.')", "return get_with_context_result(plugin, context)")


def jinja_lookup_problems() -> list[str]:
    """Why ``hook_jinja_lookups`` cannot be installed on this ansible-core (empty: it can)."""
    try:
        from ansible.plugins import loader

        cls = loader.Jinja2Loader
        problems = []
        source = inspect.getsource(cls.get_with_context)
        problems += [f"Jinja2Loader.get_with_context: no {line}" for line in _SOURCE_LINES if line not in source]
        if tuple(inspect.signature(cls.get_with_context).parameters) != ("self", "name", "args", "kwargs"):
            problems.append("Jinja2Loader.get_with_context: not the expected parameters")
        if not callable(getattr(cls, "_ensure_non_collection_wrappers", None)):
            problems.append("Jinja2Loader._ensure_non_collection_wrappers: not found")
        if "self._cached_non_collection_wrappers" not in inspect.getsource(cls.__init__):
            problems.append("Jinja2Loader._cached_non_collection_wrappers: not set")
        for name in ("get_with_context_result", "PluginLoadContext"):
            if not callable(getattr(loader, name, None)):
                problems.append(f"ansible.plugins.loader.{name}: not found")
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def _builtin_space(name: str) -> str | None:
    """The short name, for a name that resolves within ``ansible.builtin`` (bare, legacy or builtin)."""
    short = name.removeprefix("ansible.legacy.").removeprefix("ansible.builtin.")
    return short if short and "." not in short else None


def hook_jinja_lookups(missing: dict[str, set[str]]) -> None:
    """Answer lookups of the short names in ``missing[loader type]`` with "no plugin" once the loader's own
    non-collection plugins do not have them (see the module docstring)."""
    from ansible.plugins import loader

    original = loader.Jinja2Loader.get_with_context

    def get_with_context(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        short = _builtin_space(name)
        if short is not None and short in missing.get(self.type, ()):
            self._ensure_non_collection_wrappers(*args, **kwargs)
            if name.removeprefix("ansible.legacy.") not in self._cached_non_collection_wrappers:
                return loader.get_with_context_result(None, loader.PluginLoadContext(self.type, self.package))
        return original(self, name, *args, **kwargs)

    loader.Jinja2Loader.get_with_context = get_with_context


def find_missing(names: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """Of these (``filter``|``test``, name), the names ``ansible.builtin`` has no plugin of: asked once, here."""
    from ansible.plugins.loader import filter_loader, test_loader
    from ansible.utils.collection_loader._collection_finder import _get_collection_metadata

    loaders = {"filter": filter_loader, "test": test_loader}
    try:
        routing = _get_collection_metadata("ansible.builtin").get("plugin_routing", {})
    except Exception:  # no collection finder in this process (Ansible's CLI installs it): nothing is known
        return {}
    missing: dict[str, set[str]] = {}
    for kind, name in names:
        if name in routing.get(loaders[kind].type, {}):
            continue  # redirected, deprecated or removed: each lookup must say so, as it always did
        try:
            found = loaders[kind].get_with_context(f"ansible.builtin.{name}").object
        except Exception:
            continue  # an error is not an absence: leave it to the loader every time
        if found is None:
            missing.setdefault(loaders[kind].type, set()).add(name)
    return missing
