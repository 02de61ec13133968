"""Every Python process of a run: a Kubernetes name is checked while it is still a name.

Where it sits: ``running.ansible_environment`` puts this file's directory first on every run's
``PYTHONPATH``, so Python's ``site`` imports it when any interpreter of a run starts: the warm executor's
zygote and the module server (whose forks are the runs and their modules), ``ansible-playbook`` under the
runner executor, and any module that falls back to a new interpreter. It imports nothing of the operator
and may run under any Python a role's inventory names; it never imports ``kubernetes`` itself.

Why: roles pass names from a custom resource to modules (``kubernetes.core.k8s_info`` with ``name:
"{{ settings_from }}"``), and the Kubernetes client builds the request's URL by pasting the name into it.
``../../b/secrets/db-creds`` became ``/api/v1/namespaces/a/configmaps/../../b/secrets/db-creds``, which
urllib3 resolved to another namespace's Secret; ``x?watch=true`` turned a GET into a watch that held the
run until its timeout. By the time a request reaches the run proxy its path is already resolved, so the
check belongs here, before the URL exists. When the client's modules are imported, two places are
wrapped:

- ``kubernetes.dynamic.resource.Resource.path``: the ``name`` and ``namespace`` given must each be one
  path segment the API server could store (apimachinery's ``IsValidPathSegmentName``: not ``.`` or ``..``,
  no ``/`` or ``%``), with nothing that would end the path or break the URL (``?``, ``#``, whitespace,
  control characters);
- ``kubernetes.client.api_client.ApiClient``'s path building (``param_serialize`` in clients from 34 on,
  ``call_api`` before): the same for every path parameter, and no ``.``/``..`` segment, ``?`` or ``#`` in
  the path itself, nor an escaped dot or slash (``%2e``, ``%2f``).

A refused name raises ``ValueError`` naming it: the module fails, the run fails with that message, and no
request is made. Another ``sitecustomize`` later on the path is still run.

It also bounds the process's memory when the run's environment says how much it may grow
(``MEMORY_ENV``, from ``--ansible-run-memory``): ``RLIMIT_DATA`` at what the process holds now plus that
budget, so a run that would take the pod's memory fails with ``MemoryError`` instead, and the operator
lives. ``forking.enter`` does the same for every warm fork (a run, a module), each from its own size.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

MEMORY_ENV = "HYBRID_OPERATOR_RUN_MEMORY"  # bytes a process of a run may grow by (RLIMIT_DATA)
MARK = "_hybrid_operator_names_checked"  # set on what was wrapped, and on ``sys`` once installed
_ODD = re.compile(r"[/%?#\s\x00-\x1f\x7f]")
_PATH_ODD = re.compile(r"[?#\s\x00-\x1f\x7f]|%2[eEfF]")


class RefusedName(ValueError):
    """A name that would make a request for another path than the object it names."""


def check_segment(what: str, value: Any) -> None:
    """Refuse ``value`` unless it is empty or one plain path segment (see the module's docstring)."""
    if value is None or value == "":
        return
    text = str(value)
    bad = _ODD.search(text)
    if text in (".", "..") or bad is not None:
        why = f"it contains {bad.group()!r}" if bad is not None else "it is a dot segment"
        raise RefusedName(
            f"refused by hybrid-operator: the {what} {text[:200]!r} cannot be a Kubernetes object's {what} "
            f"({why}); a value taken from a custom resource may not make a request for another path"
        )


def check_path(path: Any) -> None:
    """Refuse a request path with a dot segment, a query or fragment, or an escaped dot or slash."""
    text = str(path)
    bad = _PATH_ODD.search(text)
    if bad is not None or any(part in (".", "..") for part in text.split("/")):
        raise RefusedName(
            f"refused by hybrid-operator: the request path {text[:300]!r} does not name one resource "
            f"({'it contains ' + repr(bad.group()) if bad else 'it has a dot segment'})"
        )


def _wrap(owner: type, name: str, check: Callable[[inspect.BoundArguments], None]) -> None:
    original = getattr(owner, name, None)
    if original is None or getattr(original, MARK, False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def checked(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        check(bound)
        return original(*args, **kwargs)

    setattr(checked, MARK, True)
    setattr(owner, name, checked)


def _check_resource_path(bound: inspect.BoundArguments) -> None:
    check_segment("name", bound.arguments.get("name"))
    check_segment("namespace", bound.arguments.get("namespace"))


def _check_api_call(bound: inspect.BoundArguments) -> None:
    check_path(bound.arguments.get("resource_path", ""))
    params = bound.arguments.get("path_params") or {}
    for key, value in params.items() if isinstance(params, dict) else params:
        if key == "path":  # the path under a pod's or service's proxy subresource: many segments by design
            check_path(value)
        else:
            check_segment(str(key), value)


def _patch_resource(module: types.ModuleType) -> None:
    resource = getattr(module, "Resource", None)
    if isinstance(resource, type):
        _wrap(resource, "path", _check_resource_path)


def _patch_api_client(module: types.ModuleType) -> None:
    client = getattr(module, "ApiClient", None)
    if not isinstance(client, type):
        return
    for name in ("param_serialize", "call_api"):
        method = getattr(client, name, None)
        if method is not None and "resource_path" in inspect.signature(method).parameters:
            _wrap(client, name, _check_api_call)


PATCHES: dict[str, Callable[[types.ModuleType], None]] = {
    "kubernetes.dynamic.resource": _patch_resource,
    "kubernetes.client.api_client": _patch_api_client,
}


class _Patching(importlib.abc.Loader):
    """The module's own loader, then the patch, on the freshly executed module."""

    def __init__(self, loader: importlib.abc.Loader, patch: Callable[[types.ModuleType], None]) -> None:
        self._loader = loader
        self._patch = patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        self._patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: asks the finders after it, and hands the patched loader back."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = PATCHES.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Patching(spec.loader, patch)
                return spec
        return None


def install() -> None:
    """Wrap the client's path building now if it is imported, and whenever it is; once per process."""
    if getattr(sys, MARK, False):
        return
    setattr(sys, MARK, True)
    sys.meta_path.insert(0, _Finder())
    for name, patch in PATCHES.items():
        module = sys.modules.get(name)
        if module is not None:
            patch(module)


def data_size() -> int:
    """What this process holds now as RLIMIT_DATA counts it (``VmData`` of /proc/self/status), in bytes."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def bound_memory(budget: str | None = None) -> int | None:
    """Limit this process to growing by ``budget`` bytes (``MEMORY_ENV`` by default) from what it holds
    now; the limit set (never above one already set), or None when there is no budget or no way to."""
    raw = os.environ.get(MEMORY_ENV, "") if budget is None else budget
    try:
        import resource

        grow = int(raw)
    except (ImportError, ValueError):
        return None
    size = data_size()
    if grow <= 0 or size <= 0:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = min(x for x in (size + grow, soft, hard) if x != resource.RLIM_INFINITY)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    return limit


def unbound_memory() -> None:
    """Lift this process's own bound (the zygote and the module server: each fork is bounded instead)."""
    try:
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


def _run_next_sitecustomize() -> None:
    """The ``sitecustomize`` this one shadows (a distribution's, a virtualenv's), run as it would have been."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if __name__ == "sitecustomize":  # as Python's site runs it; imported by name (``forking``), it does nothing
    install()
    bound_memory()
    try:
        _run_next_sitecustomize()
    except Exception as exc:  # as site.py does for a failing sitecustomize: say so, go on
        print(f"Error in sitecustomize (after hybrid-operator's): {exc!r}", file=sys.stderr)
