"""The modules' payloads built once per zygote, beside the first runs instead of inside them.

Where it sits: the zygote (``zygote.ZygoteServer``) notes the action names the prepared roles' tasks use
(``actions.action_names``) and, once it has said it is ready, forks ``fork_builder``, which builds those
modules' payloads and exits. Ansible builds a Python module's AnsiballZ payload (its source and every
``module_utils`` it imports, found by ``recursive_finder``, each parsed and compiled, zipped) the first time a
process calls the module, into a cache under the local temp dir. ``inworker`` keeps the payloads of collection
and ansible-core modules in one cache every run of the zygote shares, so only the first run after each
start built them, inside its own latency: ~0.23 s more for a Foo's first reconcile (``kubernetes.core.k8s``
and ``k8s_info`` ~0.12 s each), the cold start of every kind's first object after each operator restart.

Built by Ansible's own ``module_common.modify_module`` (through ``inworker``'s hook, which picks the shared
cache), with what a run's tasks pass it that the cache entry depends on: the module's path and source, the
configured compression, the extensions the configuration names (none unless a debugger or coverage is
configured). Ansible's own locking of each cache entry makes the builder and a run that needs the same module
at the same moment build it once (the other waits, then reads it). A run whose task variables ask for
another compression or extension names another entry and builds it itself, as before; a module that does not
build here is left to the runs, which report what goes wrong as they always did. Only modules whose payload
the runs share are built (``inworker.shareable``), in the order the roles name them, at most
``MAX_MODULES``. The builder runs beside the runs rather than before the zygote is ready: a roles path with
many modules (the two roles here: 11 payloads, ~1 s) would otherwise hold back every first reconcile.

``HYBRID_OPERATOR_PREBUILD_MODULES=0`` in the operator's environment leaves every build to the runs.
``tests/unit/ansible/warm/test_payloads.py`` checks that a prebuilt payload is the one the run would have
built and that the run then builds none.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable

from hybrid_operator.ansible import forking

DISABLE_ENV = "HYBRID_OPERATOR_PREBUILD_MODULES"  # "0": the runs build the payloads, as Ansible does
MAX_MODULES = 40


def fork_builder(names: list[str], shareable: Callable[[str], bool], close_fds: Iterable[int]) -> int | None:
    """Fork a child that builds the payloads of the modules ``names`` name (``prebuild``), says so on
    standard error and exits; its pid (None: switched off or nothing to build). The child closes
    ``close_fds`` (the zygote's own channels) first."""
    if os.environ.get(DISABLE_ENV) == "0" or not names:
        return None
    forking.flush_std()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        forking.reset_signals()
        for fd in close_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        started = time.monotonic()
        built, failed = prebuild(names, shareable)
        seconds = time.monotonic() - started
        print(f"zygote: {built} module payloads prepared for the runs in {seconds:.2f}s", file=sys.stderr)
        if failed:
            print(f"zygote: left to the runs, module payloads that did not build: {', '.join(failed)}", file=sys.stderr)
        code = 0
    except BaseException:
        traceback.print_exc()  # the runs build what is missing, as before
    finally:
        forking.end(code)


def prebuild(names: Iterable[str], shareable: Callable[[str], bool]) -> tuple[int, list[str]]:
    """Build the payload of each module of ``names`` (fully qualified task names; the ones that name no
    module, or one ``shareable`` refuses, are skipped) into the runs' shared cache: how many were built and
    the names whose build failed."""
    from ansible import constants
    from ansible.executor import module_common
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import module_loader
    from ansible.template import Templar

    templar = Templar(loader=DataLoader())
    compression = constants.config.get_config_value("DEFAULT_MODULE_COMPRESSION")
    built, failed, seen = 0, list[str](), set[str]()
    for name in names:
        path = _module_path(module_loader, name)
        if path is None or path in seen or not shareable(path):
            continue
        seen.add(path)
        try:
            module = module_common.modify_module(
                module_name=name,
                module_path=path,
                module_args={},
                templar=templar,
                # Names the interpreter so that no discovery is asked for; not part of the cache entry.
                task_vars={"ansible_python_interpreter": sys.executable},
                module_compression=compression,
            )
        except Exception:
            failed.append(name)
        else:  # documentation of an action plugin, a script: nothing to build ("old" style)
            built += _style(module) == "new"
        if len(seen) >= MAX_MODULES:
            break
    return built, failed


def _module_path(loader: object, name: str) -> str | None:
    """The Python source file of the module ``name`` resolves to (redirects followed), or None."""
    try:
        context = loader.find_plugin_with_context(name)  # type: ignore[attr-defined]
    except Exception:
        return None
    path = getattr(context, "plugin_resolved_path", None) if getattr(context, "resolved", False) else None
    return str(path) if path and str(path).endswith(".py") else None


def _style(module: object) -> object:
    """The style ``modify_module`` found the module in (2.19 and later return a ``_BuiltModule``; 2.18 a
    tuple of data, style and shebang)."""
    if isinstance(module, tuple):
        return module[1] if len(module) > 1 else None
    return getattr(module, "module_style", None)
