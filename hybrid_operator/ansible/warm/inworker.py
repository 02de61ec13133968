"""Module tasks inside Ansible's own worker process: the warm executor's fast path for modules.

Where it sits: the zygote (``zygote``) calls ``install`` once, after its warm-up, so every run it forks
and every worker process that run forks (one per task) inherit it. It changes two things in Ansible:

1. **Where a pipelined module runs.** Normally a module task costs ``/bin/sh``, a new Python interpreter
   (or the module server's client), the AnsiballZ wrapper unpacking its zip, and the module importing its
   libraries (``kubernetes``, ``openstack``: 0.5-1 s). Here, when the task runs on the ``local`` connection
   without ``become`` or ``async`` and the module's source is the very file this process would import
   under the module's name (a collection module or an ``ansible.builtin`` one; never a role's
   ``library/`` module), the worker ``fork()``s and the child runs the AnsiballZ wrapper Ansible built,
   as the interpreter would: stdin from /dev/null, stdout and stderr captured, the task's environment, the
   task's directory, its own process group, and module-side (not controller-side) behaviour of
   ``ansible.module_utils``. The libraries are already imported (the zygote preloads them), so only the
   module's own work is left. Each module still runs in its own short-lived process: nothing it does
   reaches the next task. Everything else (``become``, other connections, ``async``, role ``library/``
   modules) takes Ansible's usual path unchanged.
2. **The AnsiballZ cache is shared between runs.** Ansible caches each built module zip in its per-process
   temp dir; as every run is a new process, every run rebuilt every module (0.3 s for
   ``kubernetes.core.k8s_info``). For modules that live in a collection or in ansible-core the cache now
   lives in the zygote's temp dir, keyed by the module's path and source, so an edited module is rebuilt.
   Modules from a role's ``library/`` keep the per-run cache (their ``module_utils`` may differ per role).

The hooks themselves, and every private name of Ansible they touch, are in ``compat`` (``hook_modules``);
this module decides which modules may run here and runs them. When the hooks' targets are not the shape
``compat`` expects, ``install`` says why and installs nothing: modules take Ansible's usual path.
``tests/integration/test_warm_executor.py`` runs the same modules through both executors and compares
results; ``tests/unit/ansible/test_inworker.py`` fails when ansible-core changes what this relies on.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import tempfile
import traceback
from typing import Any

from hybrid_operator.ansible import compat, forking
from hybrid_operator.ansible.warm import profiling

SHARED_CACHE_DIR = "ansiballz-shared"
_installed: dict[str, Any] = {}


def importable_as(fqn: str, module_path: str) -> bool:
    """True when importing ``fqn`` in this process would load ``module_path``, the file Ansible built the
    module from (so running it here runs the same code the wrapper carries)."""
    try:
        spec = importlib.util.find_spec(fqn)
    except (ImportError, ValueError, AttributeError):
        return False
    origin = getattr(spec, "origin", None)
    return bool(origin) and os.path.realpath(str(origin)) == os.path.realpath(module_path)


def shareable(module_path: str) -> bool:
    """Modules whose built zip only depends on their own source: collection and ansible-core modules."""
    import ansible

    real = os.path.realpath(module_path)
    core = os.path.realpath(os.path.dirname(ansible.__file__)) + os.sep
    return real.startswith(core) or f"{os.sep}ansible_collections{os.sep}" in real


# ------------------------------------------------------------------------------------------- the child


def _child(wrapper: bytes, env: dict[str, str], cwd: str | None, out_fd: int, err_fd: int) -> None:
    """In the forked child: be ``python`` reading ``wrapper`` on stdin. Never returns."""
    rc = 1
    try:
        os.setpgid(0, 0)  # the module and what it starts can be killed as one
        forking.reset_signals()
        forking.redirect(None, out_fd, err_fd)
        forking.fresh_std_streams()
        forking.enter(env, cwd, replace_env=False)  # the worker's environment plus the task's, as the shell gives
        compat.to_module_side()
        rc = profiling.profiled("module", forking.run_as_main, wrapper)
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        forking.end(rc)


def run_wrapper(wrapper: bytes, env: dict[str, str], cwd: str | None) -> tuple[int, bytes, bytes]:
    """Run an AnsiballZ wrapper in a forked child of this process; (rc, stdout, stderr) as the shell
    would report them (a module killed by signal N gives 128 + N)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        forking.flush_std()
        pid = os.fork()
        if pid == 0:
            _child(wrapper, env, cwd, out.fileno(), err.fileno())
        try:
            _pid, status = os.waitpid(pid, 0)
        except BaseException:  # the task's timeout (or a signal) interrupted the wait: stop the module too
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
            raise
        code = os.waitstatus_to_exitcode(status)
        rc = 128 - code if code < 0 else code
        out.seek(0)
        err.seek(0)
        return rc, out.read(), err.read()


# ------------------------------------------------------------------------------------------- the hooks


def install(shared_root: str, in_process: compat.InProcess | None = None) -> list[str]:
    """Hook this process's Ansible (see the module docstring); why it could not (then Ansible's usual path
    stays in place for every module). ``in_process``: the lean path's runner of modules in the run's own
    process (``lean.in_process``), asked first. Once per process."""
    if _installed:
        return []
    problems = compat.module_hook_problems()
    if not problems:
        policy = compat.ModulePolicy(importable_as, shareable, run_wrapper, in_process)
        compat.hook_modules(policy, shared_root)
        _installed.update(shared_root=shared_root)
    return problems


def installed() -> bool:
    """Whether ``install`` hooked this process (module payloads then go to the runs' shared cache)."""
    return bool(_installed)


# What the hot modules import when they start: loaded once in the zygote, shared by every forked module.
PRELOAD = (
    "ansible.module_utils.basic",
    "kubernetes",
    "kubernetes.client",
    "kubernetes.dynamic",
    "kubernetes.config",
    "jsonpatch",
    "yaml",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.core",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.client",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.service",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.runner",
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.resource",
    "ansible_collections.kubernetes.core.plugins.module_utils.args_common",
    "ansible_collections.kubernetes.core.plugins.module_utils.common",
    "openstack",
    "ansible_collections.openstack.cloud.plugins.module_utils.openstack",
)


def preload(names: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import what forked modules would import; the names that could not be imported (not an error: a
    project may not use OpenStack)."""
    missing = []
    for name in (*compat.module_preload(), *names):
        try:
            importlib.import_module(name)
        except Exception:
            missing.append(name)
    return missing
