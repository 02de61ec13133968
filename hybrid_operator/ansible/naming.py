"""How a resource's fields become Ansible variables, and which names a resource may not set.

operator-sdk's rules, quirks included: spec keys snake-cased (``to_snake``, tested against its vectors),
the whole object as ``_<group>_<kind>`` (``object_var_name``), and the names a spec key may not become
because Ansible or the operator reads them (``refused_spec_names``). Used by ``inputdir`` (a run's extra
vars), the reactor's admission, and ``project`` (CRDs and scaffolds refuse the same names).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from typing import Any

_NUMBER_RUN = re.compile(r"([a-zA-Z])(\d+)([a-zA-Z](\d+))")
# Words operator-sdk keeps whole when snake-casing ("egressIPs" -> "egress_ips", not "egress_i_ps").
_SPECIAL_WORDS = ("HTTP", "URL", "IP")


def _isolate_special_words(value: str) -> str:
    """Surround the first HTTP/URL/IP (or its plural) with underscores so it becomes one word."""
    for word in _SPECIAL_WORDS:
        idx = value.find(word)
        if idx < 0:
            continue
        end = idx + len(word)
        before, after = value[:idx], value[end:]
        lead = "_" if idx > 0 else ""
        if not after:
            value = f"{before}_{word}"
        elif after[0] == "s":  # plural: the "s" belongs to the word
            rest = after[1:]
            value = f"{before}{lead}{word}S" + (f"_{rest}" if rest else "")
        else:
            value = f"{before}{lead}{word}_{after}"
    return value


def to_snake(name: str) -> str:
    """Snake-case a spec key the way operator-sdk does, quirks included (tested against its vectors)."""
    text = _NUMBER_RUN.sub(r"\1 \2 \3", name).strip(" ")
    if not text:
        return text
    prefix = "_" if text[0].isascii() and text[0].isupper() else ""
    if text.upper() != text:
        text = _isolate_special_words(text)
    words: list[str] = []
    current = ""
    pos_in_word = -1
    for i, char in enumerate(text):
        pos_in_word += 1
        nxt = text[i + 1] if i + 1 < len(text) else ""
        case_flips = bool(nxt) and ((_upper(char) and _lower(nxt)) or (_lower(char) and _upper(nxt)))
        if pos_in_word > 0 and current and current[-1] != "_" and case_flips:
            if _upper(char):  # "JSONData": the D starts a new word
                words.append(current.lower())
                current, pos_in_word = char, 0
            else:  # "sizeK8s": the word ends with this lower-case letter
                words.append((current + char).lower())
                current, pos_in_word = "", -1
        elif char in " _-":
            words.append(current.lower())
            current, pos_in_word = "", -1
        else:
            current += char
    words.append(current.lower())
    joined = "_".join(words)
    return joined if words[0] in {w.lower() for w in _SPECIAL_WORDS} else prefix + joined


def _upper(c: str) -> bool:
    return "A" <= c <= "Z"


def _lower(c: str) -> bool:
    return "a" <= c <= "z"


def snake_keys(value: Any) -> Any:
    """Snake-case every mapping key, recursively through lists, as operator-sdk's MapToSnake."""
    if isinstance(value, Mapping):
        return {to_snake(str(k)): snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def object_var_name(group: str, kind: str) -> str:
    """``_<group>_<kind>`` with dots and dashes made underscores, e.g. ``_cache_example_com_memcached``."""
    return re.sub(r"[.\-]", "_", f"_{group}_{kind.lower()}")


def snake_twins(spec: Any, limit: int = 10) -> list[tuple[str, list[str]]]:
    """Keys of one mapping anywhere in ``spec`` (through lists too, as ``snake_keys`` goes) that snake_case
    into the same name: ``(path, [keys as written])`` for at most ``limit`` mappings, in path order.

    ``snake_keys`` keeps the last of such keys, so ``{logLevel: info, log_level: x}`` reached the role as
    ``log_level: x``: a field the CRD's schema checks overridden by an unchecked twin (``"logLevel "`` with
    a trailing space too). Iterative: any depth is walked without recursion.
    """
    found: list[tuple[str, list[str]]] = []
    stack: list[tuple[Any, str]] = [(spec, "spec")]
    while stack and len(found) < limit:
        item, path = stack.pop()
        if isinstance(item, Mapping):
            names: dict[str, list[str]] = {}
            for key, value in item.items():
                names.setdefault(to_snake(str(key)), []).append(str(key))
                if isinstance(value, Mapping | list):
                    stack.append((value, f"{path}.{key}"))
            found.extend((path, keys) for keys in names.values() if len(keys) > 1)
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item) if isinstance(v, Mapping | list))
    return sorted(found[:limit])


OPERATOR_VARS = ("ansible_operator_meta",)  # with ``_<group>_<kind>`` and ``_<group>_<kind>_spec``
_PYTHON_KEYWORDS = frozenset(keyword.kwlist)


def refused_spec_names(
    spec: Mapping[str, Any], *, group: str, kind: str, snake_case: bool, reserved: frozenset[str]
) -> list[str]:
    """The spec keys, as the user wrote them, whose variable name the spec may not set.

    A spec key becomes a top-level extra var, which beats every other variable in Ansible; so the name
    it becomes (after snake_case when the watch asks for it) must not be one of Ansible's own
    (``ansible_*``, its magic variables and template names in ``reserved``), the operator's
    (``ansible_operator_meta``, ``_<group>_<kind>``, ``_<group>_<kind>_spec``), a role's internals
    (``_`` first, by convention), or something Ansible cannot take as a variable name at all.
    """
    obj_var = object_var_name(group, kind)
    own = {*OPERATOR_VARS, obj_var, f"{obj_var}_spec"}
    refused = []
    for key in spec:
        name = to_snake(str(key)) if snake_case else str(key)
        if (
            name in own
            or name in reserved
            or name.lower().startswith("ansible_")
            or name.startswith("_")
            or not (name.isascii() and name.isidentifier())
            or name in _PYTHON_KEYWORDS
        ):
            refused.append(str(key))
    return refused
