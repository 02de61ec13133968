"""A run's input: the extra vars a role receives and the private data dir ansible-runner reads.

Called by the executors (``running``) for every reconcile. The extra vars are exactly operator-sdk's
(snake_cased spec keys, ``ansible_operator_meta``, ``_<group>_<kind>``, ``_<group>_<kind>_spec``, then
watch vars, then finalizer vars); strings from the custom resource are wrapped so Ansible treats them as
data (``__ansible_unsafe``), never as templates, unless the watch opts out with ``markUnsafe: false``; the
file is written by ``extravars``, in a form Ansible can only read as that JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hybrid_operator.ansible.extravars import dump as dump_extravars
from hybrid_operator.ansible.naming import object_var_name, snake_keys
from hybrid_operator.kube.objects import name_of, namespace_of

_UNSAFE_KEY = "__ansible_unsafe"


def mark_unsafe(value: Any) -> Any:
    """Wrap every string so Ansible loads it as unsafe text: ``{{ ... }}`` inside stays literal."""
    if isinstance(value, str):
        return {_UNSAFE_KEY: value}
    if isinstance(value, Mapping):
        return {k: mark_unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mark_unsafe(v) for v in value]
    return value


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
    params: dict[str, Any] = dict(snake_keys(spec) if snake_case else spec)
    obj_key = object_var_name(group, kind)
    params[obj_key] = obj
    params[f"{obj_key}_spec"] = spec
    params["ansible_operator_meta"] = {
        "name": name_of(obj),
        "namespace": namespace_of(obj),
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


def write_private_dir(
    run_dir: Path, extravars: Mapping[str, Any], python: str = sys.executable, inventory: Path | None = None
) -> None:
    """Create a run's own private data dir: env/extravars and inventory, readable by the operator only.

    ``inventory`` (the operator's ``ANSIBLE_INVENTORY``) replaces the generated ``localhost`` inventory, as
    operator-sdk does: a directory's contents become the run's ``inventory/`` (group_vars, host_vars and
    scripts included), a file becomes ``inventory/hosts``. Copied for every run, so the run never reads
    the operator's own files while they change, and following symbolic links (a mounted ConfigMap is
    links into a hidden directory, which Ansible skips as it skips every hidden name). Its interpreter
    settings are the project's: localhost gets our Python only when the inventory does not say otherwise
    (Ansible gives an implicit localhost the Python that runs ansible-playbook, which is ours).
    """
    (run_dir / "env").mkdir(parents=True, mode=0o700)
    (run_dir / "project").mkdir(mode=0o700)
    _write_private(run_dir / "env" / "extravars", dump_extravars(extravars))
    if inventory is not None and inventory.is_dir():
        shutil.copytree(inventory, run_dir / "inventory", symlinks=False)
        (run_dir / "inventory").chmod(0o700)
        return
    (run_dir / "inventory").mkdir(mode=0o700)
    if inventory is not None:
        shutil.copyfile(inventory, run_dir / "inventory" / "hosts")  # raises when it is gone: the run fails
        shutil.copymode(inventory, run_dir / "inventory" / "hosts")  # an executable file is a dynamic inventory
        return
    _write_private(run_dir / "inventory" / "hosts", inventory_text(python))


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
