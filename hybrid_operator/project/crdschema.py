"""From a role's argument spec to the ``openAPIV3Schema`` of its CRD: the API server refuses what the role would.

Called by ``crds`` for each watches.yaml entry whose role has ``meta/argument_specs.yml``. Which options of
the ``main`` entry point become spec fields, and how each Ansible type is said in OpenAPI, is decided here;
merging the result into a CRD file that may carry hand edits is ``crds``'s business.

Options that are **not** spec fields, because something other than the custom resource's author sets them:

- the operator's own extra vars: ``ansible_operator_meta``, ``_<group>_<kind>``, ``_<group>_<kind>_spec``;
- the role's public variables, named ``<role>_*`` by convention (``foo_image`` in ``roles/foo``);
- what the watch itself sets (watches.yaml ``vars`` and the finalizer's ``vars``): those override spec keys.

Every other option is a spec field, named in camelCase when the watch snake-cases (``deployment_name`` is
``spec.deploymentName``), and must be a name the operator lets a spec set: ``generate crds`` refuses an
option the operator would refuse at run time (``ansible_*``, ``_*``, Ansible's magic names).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Any

from hybrid_operator.ansible import naming
from hybrid_operator.project.argspecs import ArgumentSpecError, Option, RoleSpec

PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"
_SCALARS = {"str": "string", "path": "string", "int": "integer", "float": "number", "bool": "boolean"}
_ANY = {"raw", "json", "jsonarg"}  # any JSON value
_QUANTITY = {"bytes", "bits"}  # Ansible takes 1024 or "1K"
# Ansible's documentation markup (C(code), O(option), L(text,url)...), said in plain text.
_MARKUP = re.compile(r"\b(C|O|V|I|B|M|P|E|RV|U)\(([^()]*)\)")
_LINK = re.compile(r"\b(L|R)\(([^(),]*),\s*([^()]*)\)")

# What the operator itself writes into every status (``status`` module): operator-sdk's conditions and
# ansibleResult, and observedGeneration on the status and on each condition.
OPERATOR_STATUS: dict[str, Any] = {
    "observedGeneration": {
        "type": "integer",
        "format": "int64",
        "description": "The metadata.generation the last completed run saw.",
    },
    "ansibleResult": {
        "type": "object",
        "description": "Task counts of the last run (ok, changed, skipped, failures, completion).",
        PRESERVE: True,
    },
    "conditions": {
        "type": "array",
        "description": "Running, Successful and Failure, as operator-sdk's Ansible operator writes them.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            PRESERVE: True,  # operator-sdk also nests an ansibleResult in the Running condition
            "properties": {
                "type": {"type": "string"},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "observedGeneration": {"type": "integer", "format": "int64"},
            },
        },
    },
}


def to_camel(name: str) -> str:
    """``deployment_name`` -> ``deploymentName``: the spec key operator-sdk snake-cases back to ``name``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def spec_options(
    spec: RoleSpec, *, group: str, kind: str, watch_vars: Collection[str], snake_case: bool, reserved: frozenset[str]
) -> tuple[Option, ...]:
    """The options of ``main`` that are spec fields (see the module docstring); refused names raise."""
    obj_var = naming.object_var_name(group, kind)
    operator_vars = {*naming.OPERATOR_VARS, obj_var, f"{obj_var}_spec"}
    picked = []
    for option in spec.options:
        name = option.name
        if name in operator_vars or name.startswith(f"{spec.role}_") or name in watch_vars:
            continue
        key = to_camel(name) if snake_case else name
        if naming.refused_spec_names({key: None}, group=group, kind=kind, snake_case=snake_case, reserved=reserved):
            raise ArgumentSpecError(
                f"role {spec.role}: option '{name}' would be spec.{key}, a name the operator refuses in a spec "
                f"(ansible_*, _*, Ansible's magic variables); rename it, or prefix it '{spec.role}_' if it is "
                "the role's own variable"
            )
        picked.append(option)
    return tuple(picked)


def spec_schema(options: tuple[Option, ...], *, snake_case: bool, where: str) -> dict[str, Any]:
    """The ``spec`` property: an object of the options, camelCased when the watch snake-cases."""
    return _object(options, _key_namer(snake_case, where), "spec")


def status_schema(declared: tuple[Option, ...], *, where: str) -> dict[str, Any]:
    """The ``status`` property: the operator's keys plus the role's (named as the role writes them)."""
    clash = sorted(o.name for o in declared if o.name in OPERATOR_STATUS)
    if clash:
        raise ArgumentSpecError(f"{where}: status key '{clash[0]}' is written by the operator, not the role")
    schema = _object(declared, lambda name, path: name, "status")
    schema.pop("required", None)  # a role writes its keys during a run: none exists before the first
    own = ", ".join(o.name for o in declared)
    schema["description"] = (
        "Written by the operator. "
        + (f"{own} {'comes' if len(declared) == 1 else 'come'} from the role; " if own else "")
        + "conditions, ansibleResult and observedGeneration from the runtime. Unknown keys are kept."
    )
    schema[PRESERVE] = True  # roles written for operator-sdk write what they like: never drop it silently
    schema["properties"] = {**schema.get("properties", {}), **OPERATOR_STATUS}
    return schema


def option_schema(option: Option, namer: Callable[[str, str], str], path: str) -> dict[str, Any]:
    """One option as an OpenAPI schema node (``path`` is its place in the object, e.g. spec.resource.cpu)."""
    schema = _type_schema(option.type, option.elements, option.options, namer, path)
    description = describe(option.description, path)
    if description:
        schema["description"] = description
    if option.choices is not None:  # for a list, Ansible checks each element against the choices
        target = schema["items"] if option.type == "list" else schema
        of = option.elements if option.type == "list" else option.type
        target["enum"] = [_coerce(c, of, path) for c in option.choices]
    if option.has_default and option.type != "list":
        schema["default"] = _coerce(option.default, option.type, path)
    elif option.has_default:
        if not isinstance(option.default, list):
            raise ArgumentSpecError(f"{path}: the default of a list must be a list, got {option.default!r}")
        schema["default"] = [_coerce(v, option.elements, path) for v in option.default]
    return schema


def describe(text: str, path: str) -> str:
    """Ansible markup made plain; a leading ``spec.fieldName.`` that only repeats the field's path dropped."""
    text = _LINK.sub(lambda m: f"{m.group(2)} ({m.group(3)})", text)
    text = _MARKUP.sub(lambda m: f"`{m.group(2)}`" if m.group(1) in ("C", "O", "V", "RV") else m.group(2), text)
    for lead in (f"{path}. ", f"{path}, "):
        if text.startswith(lead):
            return text[len(lead) :].strip()
    return "" if text == f"{path}." else text


def _type_schema(
    type_: str, elements: str | None, options: tuple[Option, ...], namer: Callable[[str, str], str], path: str
) -> dict[str, Any]:
    if type_ in _SCALARS:
        return {"type": _SCALARS[type_]}
    if type_ in _ANY:
        return {PRESERVE: True}
    if type_ in _QUANTITY:
        return {INT_OR_STRING: True}
    if type_ == "dict":
        return _object(options, namer, path)
    # A list: its items as the elements say; a list of anything keeps what it is given.
    items = _type_schema(elements, None, options, namer, f"{path}[]") if elements else {PRESERVE: True}
    return {"type": "array", "items": items}


def _object(options: tuple[Option, ...], namer: Callable[[str, str], str], path: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    if not options and path not in ("spec", "status"):
        schema[PRESERVE] = True  # a dict without options: Ansible takes any keys, and so does the CRD
        return schema
    properties: dict[str, Any] = {}
    required = []
    for option in options:
        key = namer(option.name, path)
        if key in properties:
            raise ArgumentSpecError(f"{path}: options '{option.name}' and another both become the key {key}")
        properties[key] = option_schema(option, namer, f"{path}.{key}")
        if option.required:
            required.append(key)
    schema["properties"] = properties
    if required:
        schema["required"] = required
    return schema


def _key_namer(snake_case: bool, where: str) -> Callable[[str, str], str]:
    def name(option: str, path: str) -> str:
        if not snake_case:
            return option
        key = to_camel(option)
        back = naming.to_snake(key)
        if back != option:
            raise ArgumentSpecError(
                f"{where}: option '{option}' cannot be a spec key: its camelCase {path}.{key} is snake-cased back "
                f"to '{back}' by the operator; name the option '{back}'"
            )
        return key

    return name


def _coerce(value: Any, type_: str | None, path: str) -> Any:
    """A default or choice as the JSON type of its field (Ansible converts ``5`` for a str; a CRD does not)."""
    if type_ in ("str", "path") and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    expected = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,), "path": (str,)}.get(type_ or "")
    if expected and (not isinstance(value, expected) or (isinstance(value, bool) and type_ != "bool")):
        raise ArgumentSpecError(f"{path}: {value!r} is not a {type_}")
    return value
