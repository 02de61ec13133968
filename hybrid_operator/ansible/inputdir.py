"""A run's input: the extra vars a role receives and the private data dir ansible-runner reads.

Called by the executors (``running``) for every reconcile. The extra vars are exactly operator-sdk's
(snake_cased spec keys, ``ansible_operator_meta``, ``_<group>_<kind>``, ``_<group>_<kind>_spec``, then
watch vars, then finalizer vars); strings from the custom resource are wrapped so Ansible treats them as
data (``__ansible_unsafe``), never as templates, unless the watch opts out with ``markUnsafe: false``; the
file is written by ``extravars``, in a form Ansible can only read as that JSON.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hybrid_operator.ansible.extravars import dump as dump_extravars

_NUMBER_RUN = re.compile(r"([a-zA-Z])(\d+)([a-zA-Z](\d+))")
# Words operator-sdk keeps whole when snake-casing ("egressIPs" -> "egress_ips", not "egress_i_ps").
_SPECIAL_WORDS = ("HTTP", "URL", "IP")
_UNSAFE_KEY = "__ansible_unsafe"


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


def mark_unsafe(value: Any) -> Any:
    """Wrap every string so Ansible loads it as unsafe text: ``{{ ... }}`` inside stays literal."""
    if isinstance(value, str):
        return {_UNSAFE_KEY: value}
    if isinstance(value, Mapping):
        return {k: mark_unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mark_unsafe(v) for v in value]
    return value


def object_var_name(group: str, kind: str) -> str:
    """``_<group>_<kind>`` with dots and dashes made underscores, e.g. ``_cache_example_com_memcached``."""
    return re.sub(r"[.\-]", "_", f"_{group}_{kind.lower()}")


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


def build_extravars(
    obj: Mapping[str, Any],
    *,
    group: str,
    kind: str,
    snake_case: bool,
    unsafe: bool,
    watch_vars: Mapping[str, Any],
    finalizer_vars: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The extra vars of one run, in operator-sdk's order: later sources override earlier ones.

    Only what comes from the custom resource is marked unsafe; watch and finalizer vars are the
    operator author's own and may hold templates.
    """
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    metadata = obj.get("metadata") or {}
    params: dict[str, Any] = dict(snake_keys(spec) if snake_case else spec)
    obj_key = object_var_name(group, kind)
    params[obj_key] = obj
    params[f"{obj_key}_spec"] = spec
    params["ansible_operator_meta"] = {
        "name": metadata.get("name"),
        "namespace": metadata.get("namespace", ""),
    }
    if unsafe:
        params = mark_unsafe(params)
    params.update(watch_vars)
    if finalizer_vars:
        params.update(finalizer_vars)
    return params


def inventory_text(python: str = sys.executable) -> str:
    """localhost over the local connection, with the operator's own Python (so modules find its libraries)."""
    return f"localhost ansible_connection=local ansible_python_interpreter={python}\n"


def role_playbook(role: str) -> str:
    """The wrapper playbook that runs a role: facts are not gathered unless the role asks for them."""
    return (
        "---\n"
        "# Written by hybrid-operator: runs one role against localhost for one reconcile.\n"
        "- name: Reconcile\n"
        "  hosts: localhost\n"
        "  gather_facts: false\n"
        "  roles:\n"
        f"    - role: {json.dumps(role)}\n"
    )


def write_private_dir(run_dir: Path, extravars: Mapping[str, Any], python: str = sys.executable) -> None:
    """Create a run's own private data dir: env/extravars and inventory, readable by the operator only."""
    (run_dir / "env").mkdir(parents=True, mode=0o700)
    (run_dir / "inventory").mkdir(mode=0o700)
    (run_dir / "project").mkdir(mode=0o700)
    _write_private(run_dir / "env" / "extravars", dump_extravars(extravars))
    _write_private(run_dir / "inventory" / "hosts", inventory_text(python))


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
