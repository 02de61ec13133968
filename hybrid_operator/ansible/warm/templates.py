"""Jinja templates compiled once, in the zygote, for every run: the warm executor's template cache.

Where it sits: the zygote (``zygote``) calls ``install`` after its warm-up and then ``warm`` with the roles'
files (``project.role_files``). Every run is a fresh fork of the zygote, so before this a run compiled every
template it met (a Foo run ~90 of them, ~0.1 s of its CPU) and threw them away at exit. Now
``AnsibleEnvironment`` compiles go through a cache of code objects (``compat.hook_template_cache``; what the
key holds, and why a cached template is always the one Jinja would compile, is written there), and the zygote
fills it before it forks: each string of the roles' task, handler, variable and meta files that looks like a
template is compiled as a task argument is, each conditional (``when``, ``changed_when``, ``failed_when``,
``until``, ``that``) as a conditional is, and each file under ``templates/`` as the ``template`` action does.
Compiling never renders, so no lookup or filter runs in the zygote. Templates the zygote did not see (a
playbook's own, one built at run time) are compiled by the run on a miss and kept for the rest of that run.
The zygote also asks Ansible's filter and test loaders once for each of Jinja's own names (``length``, ``map``,
``selectattr``...) and tells them which ``ansible.builtin`` has no plugin of (``compat.hook_jinja_lookups``):
without that, every template environment of every run searched ``ansible.builtin``'s plugin files for them.

``HYBRID_OPERATOR_TEMPLATE_CACHE=0`` in the operator's environment turns this off (read by the zygote).
``tests/unit/ansible/warm/test_templates.py`` checks the key and the shape it relies on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hybrid_operator.ansible import compat

DISABLE_ENV = "HYBRID_OPERATOR_TEMPLATE_CACHE"
CONDITIONAL_KEYS = frozenset({"when", "changed_when", "failed_when", "until", "that"})
_MARKS = ("{{", "{%", "{#")
CACHE: list[compat.CodeCache] = []  # the installed cache (one per process)


def install() -> list[str]:
    """Hook this process's Ansible (see the module docstring); why it could not (then every run compiles its
    templates itself, as before). Once per process."""
    if CACHE:
        return []
    if os.environ.get(DISABLE_ENV) == "0":
        return [f"{DISABLE_ENV}=0"]
    # The lookup hook goes with the cache: written for the same ansible-core versions (off on 2.18, where
    # the cache is), and off with it.
    problems = compat.template_cache_problems() or compat.jinja_lookup_problems()
    if not problems:
        cache = compat.CodeCache()
        compat.hook_template_cache(cache)
        compat.hook_jinja_lookups(compat.find_missing(jinja_builtin_names()))
        CACHE.append(cache)
    return problems


def jinja_builtin_names() -> list[tuple[str, str]]:
    """(``filter``|``test``, name) of Jinja's own filters and tests, which Ansible's loaders are asked for first."""
    from jinja2.filters import FILTERS
    from jinja2.tests import TESTS

    return [("filter", name) for name in FILTERS] + [("test", name) for name in TESTS]


def strings_of(data: Any) -> tuple[list[str], list[str]]:
    """The template strings and the conditional expressions in parsed YAML ``data``."""
    templates: list[str] = []
    expressions: list[str] = []
    for key, value in _leaves(data, None):
        if key in CONDITIONAL_KEYS and not any(mark in value for mark in _MARKS):
            if value.strip():
                expressions.append(value.strip())
        elif any(mark in value for mark in _MARKS):
            templates.append(value)
    return templates, expressions


def _leaves(data: Any, key: object) -> Iterator[tuple[object, str]]:
    """(the mapping key it sits under, the string) for every string in ``data``."""
    if isinstance(data, str):
        yield key, data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from _leaves(v, k)
    elif isinstance(data, list):
        for item in data:
            yield from _leaves(item, key)


def warm(role_data: Iterable[Any], template_files: Iterable[Path]) -> int:
    """Compile the templates of these parsed role files and template files into the cache; how many the cache
    holds after."""
    if not CACHE:
        return 0
    templates: list[str] = []
    expressions: list[str] = []
    for data in role_data:
        found = strings_of(data)
        templates += found[0]
        expressions += found[1]
    contents = []
    for path in template_files:
        text = _text(path)
        if text is not None and any(mark in text for mark in _MARKS):
            contents.append(text)
    compat.precompile(dict.fromkeys(templates), dict.fromkeys(expressions), dict.fromkeys(contents))
    return len(CACHE[0])


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
