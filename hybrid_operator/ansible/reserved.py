"""What the installed ansible-core reserves, read from it: variable names, mapping keys, and a check.

Called once per process by the reactor's admission (``reservations``), which asks before every run, and by
``create api``/``generate crds`` (``reserved_names``). Three things come from one short-lived child process
that imports ansible-core:

- the variable names a custom resource's spec may not set (below);
- the mapping keys its JSON decoders give meaning to (``__ansible_unsafe``...; ``extravars``), refused at
  any depth of an object;
- the check that the extra-vars file ``extravars`` writes is read by Ansible's own loader
  (``load_extra_vars``, as ``-e @file`` is) with every string from the resource still data: two probe
  objects go through ``inputdir.build_extravars`` and ``extravars.dump`` as a run's would, are loaded and
  templated in the child; the first (odd strings, templates everywhere) must come back unchanged while a
  trusted template beside it renders (so the check cannot pass by templating nothing); the second
  (reserved keys that once made Ansible fall back to YAML) may fail to load but must render nothing.
  When either fails, the reactor refuses every run (``loading_problem``).

On the variable names: every spec key becomes a top-level extra var, the highest precedence Ansible has, so
a spec key named like one of Ansible's own settings (``ansible_shell_executable``,
``ansible_ssh_common_args``) is code execution, and one named like a magic variable or template global
(``omit``, ``hostvars``, ``lookup``) changes what the role means. The names come from ansible-core
itself: its connection/become/shell variable mapping, the magic variables its VariableManager gives a
play, the globals of its template environment and its template keywords. They are read in a
short-lived child process: importing that much of Ansible would cost the long-running operator tens of
megabytes for one set of strings.

Not refused, on purpose: the play and task keywords of ``ansible.vars.reserved`` (``name``, ``port``,
``timeout``, ``action``...). Ansible only warns about variables with those names and never reads them as
settings (its settings are the ``ansible_*`` names), while real custom resources, our own
VirtualMachine among them, have spec fields called that.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybrid_operator.ansible import compat, extravars, inputdir

log = logging.getLogger(__name__)

# Per-task magic variables that no play-level source lists (the rest come from ansible-core), and the names
# Jinja itself reads as literals or an operator, never as a variable (2.19 and later also list them; 2.18
# does not, and a spec key refused on one minor is refused on all).
_TASK_MAGIC = frozenset({"hostvars", "role_name", "role_path", "role_uuid", "item"})
_JINJA_NAMES = frozenset({"true", "false", "none", "True", "False", "None", "not"})

# Each source is tried on its own: a source that moved in a newer ansible-core is reported and skipped,
# the others still count (and every ``ansible_*`` and ``_*`` name is refused whatever the sources say).
_PROBE = r"""
import importlib, json, sys, warnings
warnings.simplefilter("ignore")
ARGS = json.loads(sys.argv[1])
names, missing, result = set(), [], {}
def loaded_extra_vars(path):  # first: the VariableManager below caches extra vars of its own
    from ansible import context
    from ansible.module_utils.common.collections import ImmutableDict
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.utils.vars import load_extra_vars
    context.CLIARGS = ImmutableDict({"extra_vars": ["@" + path]})
    load_extra_vars.extra_vars = None
    try:
        loader = DataLoader()
        loaded = load_extra_vars(loader)
        return {"loaded": loaded, "templated": Templar(loader=loader, variables={}).template(loaded)}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    finally:
        load_extra_vars.extra_vars = None
for probe_name in ("data", "hostile"):
    result[probe_name] = loaded_extra_vars(ARGS[probe_name])
try:
    module, owner, attribute = ARGS["decoder_keys"]
    found = getattr(getattr(importlib.import_module(module), owner), attribute)
    if callable(found):  # a decoder hook comparing each key with string constants (2.18)
        found = [c for c in found.__code__.co_consts if isinstance(c, str) and c.startswith("__ansible_")]
    result["keys"] = sorted(str(k) for k in found)
except Exception as exc:
    missing.append(f"decoder keys: {exc!r}")
def source(name, get):
    try:
        names.update(str(n) for n in get())
    except Exception as exc:
        missing.append(f"{name}: {exc!r}")
def connection_vars():
    from ansible import constants as C
    return [n for aliases in C.MAGIC_VARIABLE_MAPPING.values() for n in aliases]
def magic():
    from ansible import context
    from ansible.module_utils.common.collections import ImmutableDict
    from ansible.parsing.dataloader import DataLoader
    from ansible.inventory.manager import InventoryManager
    from ansible.vars.manager import VariableManager
    from ansible.playbook.play import Play
    context.CLIARGS = ImmutableDict({})
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources="localhost,")
    manager = VariableManager(loader=loader, inventory=inventory)
    play = Play.load({"hosts": "localhost", "gather_facts": False}, variable_manager=manager, loader=loader)
    return manager.get_vars(play=play, host=inventory.get_host("localhost"), include_hostvars=True)
def template_globals():
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    return Templar(DataLoader()).environment.globals
def template_keywords():  # a private name of ansible-core: where it is, is compat.template_keywords()
    module, attribute = ARGS["template_keywords"]
    return getattr(importlib.import_module(module), attribute)
for item in (connection_vars, magic, template_globals, template_keywords):
    if item is not template_keywords or ARGS["template_keywords"]:
        source(item.__name__, item)
# What the loader returned may hold objects JSON cannot write (2.18's vault wrapper): their type name will do.
json.dump({**result, "names": sorted(names), "missing": missing}, sys.stdout, default=lambda o: type(o).__name__)
"""
# The check's template: its text and what it renders to differ, so a templated string is seen.
_TEMPLATE, _RENDERED = "{{ 'hyop' ~ 'rendered' }}", "hyoprendered"
_CONTROL = "hyop_trusted_control"  # a trusted var beside the probe (a watch's var): it must render
_RETRY = 60.0  # seconds before a probe that could not run is tried again


@dataclass(frozen=True)
class Reservations:
    """What the installed ansible-core reserves, and whether it reads our extra vars as data.

    ``loading_problem`` is None when the check passed; otherwise why runs must not start. ``final`` is
    False when the probe could not run at all (it is tried again later).
    """

    names: frozenset[str]
    keys: frozenset[str]
    loading_problem: str | None
    final: bool = True


_lock = threading.Lock()
_cached: Reservations | None = None
_failed_at = 0.0


def reserved_names() -> frozenset[str]:
    """Ansible's own variable names (computed once per process, in a child process)."""
    return reservations().names


def reservations() -> Reservations:
    """The installed ansible-core's reservations and the extra-vars check (once per process).

    A probe that could not run (no interpreter, a timeout on a loaded machine) is not kept: its fallback
    (the prefix rules, and runs refused) holds for ``_RETRY`` seconds, then the probe runs again.
    """
    global _cached, _failed_at
    with _lock:
        if _cached is not None and (_cached.final or time.monotonic() - _failed_at < _RETRY):
            return _cached
        _cached = _probe()
        if not _cached.final:
            _failed_at = time.monotonic()
        return _cached


def _probe() -> Reservations:
    env = {**os.environ, "ANSIBLE_DEPRECATION_WARNINGS": "false", "ANSIBLE_NOCOLOR": "true"}
    with tempfile.TemporaryDirectory(prefix="hybrid-operator-probe-") as scratch:
        args: dict[str, Any] = {"template_keywords": compat.template_keywords(), "decoder_keys": compat.decoder_keys()}
        for name in ("data", "hostile"):
            args[name] = str(Path(scratch) / name)
            Path(args[name]).write_text(extravars.dump(_probe_vars(name == "hostile", unsafe=True)), "utf-8")
        try:
            done = subprocess.run(
                [sys.executable, "-P", "-c", _PROBE, json.dumps(args)],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
                check=False,
            )
            found = json.loads(done.stdout) if done.returncode == 0 else None
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            found, done = None, exc  # type: ignore[assignment]
    if not isinstance(found, dict):
        # Without the list the prefix rules still hold (every ansible_*, _* and __ansible_* name).
        why = _failure(done)
        log.error("could not ask the installed Ansible what it reserves; refusing runs until it answers: %s", why)
        refused = f"the check could not run: {why}"
        return Reservations(_TASK_MAGIC | _JINJA_NAMES, extravars.KNOWN_RESERVED_KEYS, refused, False)
    for missing in found.get("missing", []):
        log.warning("a source of Ansible's reserved names is unavailable: %s", missing)
    keys = frozenset(found.get("keys", [])) | extravars.KNOWN_RESERVED_KEYS
    problem = loading_problem(found.get("data"), found.get("hostile"), _probe_vars(False, unsafe=False))
    if problem:
        log.error("refusing every run: the installed Ansible does not read the extra vars as data: %s", problem)
    return Reservations(frozenset(found.get("names", [])) | _TASK_MAGIC | _JINJA_NAMES, keys, problem)


def _failure(done: object) -> str:
    if isinstance(done, subprocess.CompletedProcess):
        lines = str(done.stderr or "").strip().splitlines() or [f"no output; exit code {done.returncode}"]
        return f"exit code {done.returncode}: {lines[-1][:300]}"
    return str(done)[:300]


def _probe_vars(hostile: bool, *, unsafe: bool) -> dict[str, Any]:
    """A run's extra vars for the probe object, made by the same function as every run's."""
    obj = {
        "apiVersion": "probe.hybrid-operator.dev/v1",
        "kind": "Probe",
        "metadata": {"name": _TEMPLATE, "namespace": "ns", "annotations": {"a": _TEMPLATE}},
        "spec": extravars.probe(_TEMPLATE, hostile=hostile),
        "status": {"phase": _TEMPLATE},
    }
    return inputdir.build_extravars(
        obj,
        group="probe.hybrid-operator.dev",
        kind="Probe",
        snake_case=False,
        unsafe=unsafe,
        watch_vars={_CONTROL: _TEMPLATE} if unsafe else {},
    )


def loading_problem(data: Any, hostile: Any, expected: dict[str, Any]) -> str | None:
    """Why Ansible's reading of the probes is not the data we wrote, or None when it is.

    ``data`` (the child's answer for the probe without reserved keys) must load with every string equal
    and unchanged by templating, and the trusted control rendered; ``hostile`` (with reserved keys) may
    fail to load, but must never render a string of the resource.
    """
    if not isinstance(data, dict) or "loaded" not in data:
        return f"Ansible could not load the probe: {(data or {}).get('error', 'no answer')}"
    loaded, templated = data["loaded"], data["templated"]
    if not isinstance(templated, dict) or templated.pop(_CONTROL, None) != _RENDERED:
        return "the trusted control variable was not rendered, so the check proves nothing"
    loaded.pop(_CONTROL, None)
    for name, got in (("loaded", loaded), ("templated", templated)):
        if got != expected:
            return f"the probe {name} differs from what was written: {_first_difference(expected, got)}"
    templated_hostile = hostile.get("templated") if isinstance(hostile, dict) else None
    if isinstance(templated_hostile, dict):  # 2.18 loads it: the decoder takes those keys as its own
        templated_hostile.pop(_CONTROL, None)
    if _RENDERED in json.dumps(templated_hostile):
        return "a resource holding a reserved key had its strings rendered as templates"
    return None


def _first_difference(want: Any, got: Any) -> str:
    wanted, seen = list(extravars.string_leaves(want)), list(extravars.string_leaves(got))
    for (path, value), other in zip(wanted, seen, strict=False):
        if (path, value) != other:
            return f"at {path or '(top)'}: wrote {value!r}, Ansible gave {other[1]!r}"[:300]
    return f"{len(wanted)} strings written, {len(seen)} read back, or the numbers differ"
