"""How a run's extra vars reach Ansible as data: the file's format, and the keys no object may hold.

Called by ``inputdir`` (which builds the extra vars and writes ``env/extravars`` for both executors), by
the reactor's admission (``reserved_key_paths``, before every run) and by ``reserved``'s start-up check.

Ansible reads the file given to ``-e @file`` first as JSON, through a decoder that gives meaning to a few
mapping keys (``__ansible_unsafe``, ``__ansible_vault``, and since 2.19 ``__ansible_type``), and when that
decoder raises it reads the same text again as YAML, which trusts every string. Our untrusted strings are
``{"__ansible_unsafe": "..."}`` in that JSON, so one ``{"__ansible_unsafe": 1}`` anywhere in a custom
resource once made the decoder raise, the YAML reading took every wrapped string for a trusted template,
and the resource's author ran commands as the operator. Two independent defences:

- the admission refuses every object that holds such a key, at any depth (``reserved_key_paths``);
- the file begins with a tab (``dump``). JSON takes a tab as whitespace; YAML cannot start a token with
  one (PyYAML's and libyaml's parsers both stop), so a file the JSON decoder refuses, for whatever reason,
  is refused as a whole and the run fails: it is never read a second time as YAML.

Why not YAML with ``!unsafe`` tags: since ansible-core 2.19, ``!unsafe "true"`` is loaded as a boolean
and ``!unsafe ""`` as null (the tag re-resolves the scalar as if it were plain), so a resource's strings
would change type; the JSON wrapper keeps every type on every supported minor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "KNOWN_RESERVED_KEYS",
    "RESERVED_KEY_PREFIX",
    "dump",
    "probe",
    "reserved_key_paths",
    "string_leaves",
]

# Mapping keys ansible-core's JSON decoders give meaning to (``ansible.parsing.ajson`` on 2.18;
# ``_legacy._Profile.deserialize_map`` and ``AnsibleSerializable._TYPE_KEY`` on 2.19-2.21). The
# installed ansible-core's own list is read at start-up (``reserved``); every key with the prefix is
# refused anyway, so a key a later release reserves is refused before we know its name.
RESERVED_KEY_PREFIX = "__ansible_"
KNOWN_RESERVED_KEYS = frozenset({"__ansible_unsafe", "__ansible_vault", "__ansible_type"})
_NOT_YAML = "\t"  # valid JSON whitespace; no YAML parser starts a document with it


def dump(extravars: Mapping[str, Any]) -> str:
    """The text of ``env/extravars``: JSON that no YAML parser accepts (see the module's docstring)."""
    return _NOT_YAML + json.dumps(extravars, default=str)


def reserved_key_paths(obj: Any, keys: frozenset[str] = KNOWN_RESERVED_KEYS, limit: int = 10) -> list[str]:
    """Paths (``spec.a[2].__ansible_unsafe``) of mapping keys Ansible's decoders give meaning to.

    A key is reserved when it is in ``keys`` or starts with ``RESERVED_KEY_PREFIX``. Iterative, so any
    depth is walked without recursion; at most ``limit`` paths, sorted.
    """
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(obj, "")]
    while stack and len(found) < limit:
        item, path = stack.pop()
        if isinstance(item, Mapping):
            for key, value in item.items():
                name = str(key)
                child = f"{path}.{name}" if path else name
                if name in keys or name.startswith(RESERVED_KEY_PREFIX):
                    found.append(child)
                if isinstance(value, Mapping | list):
                    stack.append((value, child))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item) if isinstance(v, Mapping | list))
    return sorted(found[:limit])


def string_leaves(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in ``value`` (mapping keys too, as ``path{}``) with its path, in order."""
    if isinstance(value, str):
        yield path, str(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield f"{path}{{}}", str(key)
            yield from string_leaves(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from string_leaves(item, f"{path}[{i}]")


def probe(template: str, *, hostile: bool) -> dict[str, Any]:
    """An object for the start-up check, with ``template`` (a Jinja expression) in every kind of place.

    The check templates every string of what Ansible loaded and expects it back unchanged. Without
    ``hostile``: strings a writer could get wrong. With it: reserved keys with values of the wrong type
    (what once made the JSON decoder raise and Ansible read the file as YAML) beside plain templates, and
    nothing else, so that YAML would read it if the format let it.
    """
    if hostile:
        return {
            "message": template,
            "extra": {"__ansible_unsafe": 1, "map": {"a": template}},
            "items": [template, {"__ansible_vault": 1}, {"__ansible_type": 1}],
        }
    return {
        "message": template,
        "nested": {"list": [template, {"deep": [[template]]}], f"key {template}": template},
        "labels": {"<<": template, "!unsafe": template, "*alias": "&anchor", "{{": "}}"},
        "strange": [
            "",
            " leading and trailing ",
            "line\nbreaks\r\nand\ttabs",
            "\x00\x07\x1b\x7f\x85\u2028\u2029\ufeff\U0001f600 \u00e9",
            "true",
            "1.5",
            "null",
            "~",
            "2024-01-01",
            "- a",
            "'\"\\/",
            "{% raw %}",
        ],
        "numbers": [0, -1, 10**30, 1.5, -0.0, True, False, None],
    }
