"""``lookup('template')`` without a deep copy of every variable of the task for each template it renders.

Where it sits: the zygote (``warm.zygote``) calls ``copy_template_variables_shallow`` after its warm-up, so
every run inherits it. For each file it renders, ansible-core's template lookup
(``ansible/plugins/lookup/template.py``) deep-copies all of the task's variables, adds the template's own
(``template_path``, ``ansible_managed``, the ``template_vars`` option) to the copy and renders with it.
The deep copy is there so that the template cannot change the caller's variables; it rebuilds every fact
and every value of the role's defaults and vars, with their templating engines and tags, per lookup (a
heavy role's run: 10 lookups, ~15 % of its deep copies; upstream's comment beside it asks why it is not a
layer over the variables).

Since ansible-core 2.19 a template reads its variables through lazy containers, new ones each time it reads
a value: ``{{ x.append(1) }}`` or ``{{ d.update(...) }}`` in a template change a container made for that
read, never the variable (``_mutation_stays_in_the_template`` checks it in this ansible-core before the hook
goes in). So a new top-level dict over the same values is what the template can see and change: the hook
gives the lookup ``dict(variables)`` where it called ``deepcopy(variables)``, and the lookup adds its own
variables to that new dict as before. Any other argument (not a plain dict) is deep-copied as before.
``HYBRID_OPERATOR_TEMPLATE_LOOKUP_HOOK=0`` in the operator's environment leaves it out (read by the zygote);
on 2.18, where a template can change what it reads, it is not installed.
"""

from __future__ import annotations

import copy
import inspect
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from hybrid_operator.ansible.compat.versions import ansible_version

_FIRST = (2, 19)  # the first minor whose templates read their variables through lazy containers
_THE_COPY = "vars = deepcopy(variables)"  # the lookup's one deep copy, as its source writes it


def _lookup_module() -> ModuleType:
    """The module the plugin loader runs ``lookup('template')`` from (loaded here if it is not yet)."""
    from ansible.plugins.loader import lookup_loader

    plugin = lookup_loader.get("ansible.builtin.template")
    if plugin is None:
        raise LookupError("lookup plugin ansible.builtin.template: not found")
    return sys.modules[type(plugin).__module__]


def _mutation_stays_in_the_template() -> list[str]:
    """What a template that changes what it reads changes of its variables in this ansible-core (empty:
    nothing, as the hook needs)."""
    from ansible._internal._templating._engine import TemplateEngine
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import trust_as_template

    variables: dict[str, Any] = {"x": [1], "d": {"a": [1], "b": {}}}
    engine = TemplateEngine(loader=DataLoader(), variables=variables)
    for text in ("{{ x.append(2) }}", "{{ d.a.append(2) }}", "{{ d.update({'z': 1}) }}", "{{ d.b.update({'w': 2}) }}"):
        engine.template(trust_as_template(text))
    if variables != {"x": [1], "d": {"a": [1], "b": {}}}:
        return [f"a template changed the variables it read: {variables!r}"]
    return []


def template_lookup_problems(switch: str) -> list[str]:
    """Why ``copy_template_variables_shallow`` is not to be installed: the environment variable ``switch``
    is ``0``, this minor's templates can change their variables, or the lookup is not the expected one."""
    if os.environ.get(switch) == "0":
        return [f"{switch}=0"]
    major, minor, full = ansible_version()
    if (major, minor) < _FIRST:
        return [f"ansible-core {full}: a template can change the variables it reads"]
    try:
        module = _lookup_module()
        source = inspect.getsource(module)
        problems = []
        if module.__dict__.get("deepcopy") is not copy.deepcopy:
            problems.append("lookup template: its deepcopy is not copy.deepcopy")
        if source.count("deepcopy(") != 1 or _THE_COPY not in source:
            problems.append(f"lookup template: not one {_THE_COPY!r}")
        problems += _mutation_stays_in_the_template()
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def copy_template_variables_shallow() -> Callable[..., Any]:
    """Install the hook (see the module docstring; check ``template_lookup_problems`` first); the original
    ``deepcopy`` of the lookup's module."""
    module = _lookup_module()
    original: Callable[..., Any] = module.__dict__["deepcopy"]

    def deepcopy(value: Any, memo: Any = None) -> Any:
        if type(value) is dict and memo is None:
            return dict(value)
        return original(value, memo)

    module.__dict__["deepcopy"] = deepcopy
    return original
