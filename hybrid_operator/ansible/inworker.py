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

``tests/integration/test_warm_executor.py`` runs the same modules through both executors and compares
results; ``tests/unit/ansible/test_inworker.py`` fails when ansible-core changes what this relies on.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import importlib.util
import io
import os
import re
import signal
import sys
import tempfile
import types
from collections.abc import Callable
from typing import Any

from hybrid_operator.ansible.modserver import exit_status

# The wrapper ansible-core writes ends with ``_ansiballz_main(... module_fqn='<name>', ...)``, one argument
# per line (ansible/executor/module_common.py).
_MODULE_FQN = re.compile(rb"^module_fqn=(['\"])([A-Za-z0-9_.]+)\1,$", re.MULTILINE)
_WRAPPER_MARK = b"_ANSIBALLZ_WRAPPER = True"
SHARED_CACHE_DIR = "ansiballz-shared"
_installed: dict[str, Any] = {}


def module_fqn(wrapper: bytes) -> str | None:
    """The Python name of the module an AnsiballZ wrapper runs, or None if ``wrapper`` is not one."""
    if _WRAPPER_MARK not in wrapper:
        return None
    match = _MODULE_FQN.search(wrapper)
    return match.group(2).decode() if match else None


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


def _to_module_side() -> None:
    """Undo what importing Ansible's controller did to ``ansible.module_utils``: a module process runs
    with ``is_controller`` false (warnings go into the result, the target JSON encoder is used) and the
    module-side traceback switch."""
    from ansible.module_utils import _internal
    from ansible.module_utils._internal import _traceback

    _internal.is_controller = False
    _traceback._is_traceback_enabled = _traceback._is_module_traceback_enabled


def _child(wrapper: bytes, env: dict[str, str], cwd: str | None, out_fd: int, err_fd: int) -> None:
    """In the forked child: be ``python`` reading ``wrapper`` on stdin. Never returns."""
    rc = 1
    try:
        os.setpgid(0, 0)  # the module and what it starts can be killed as one
        signal.set_wakeup_fd(-1)
        signal.alarm(0)  # the worker's task timeout is the worker's, not ours
        for signum in (signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter sets it
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.close(null)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        os.environ.update(env)
        if cwd:
            os.chdir(cwd)
        _to_module_side()
        sys.argv = [""]
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        code = compile(wrapper, "<stdin>", "exec")
        exec(code, main.__dict__)  # this process *is* the interpreter the wrapper was written for
        rc = 0
    except SystemExit as exc:
        rc = exit_status(exc)
    except BaseException:
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exc()
        rc = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(rc & 0xFF)


def run_wrapper(wrapper: bytes, env: dict[str, str], cwd: str | None) -> tuple[int, bytes, bytes]:
    """Run an AnsiballZ wrapper in a forked child of this process; (rc, stdout, stderr) as the shell
    would report them (a module killed by signal N gives 128 + N)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
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


# ------------------------------------------------------------------------------------------- the patches


def _eligible(action: Any, in_data: object, sudoable: bool, executable: object, chdir: object) -> str | None:
    """The module name to run in this worker, or None for Ansible's usual path."""
    if not isinstance(in_data, bytes) or executable is not None or chdir:
        return None
    connection = action._connection
    if getattr(connection, "transport", None) != "local" or (sudoable and getattr(connection, "become", None)):
        return None
    module_path = getattr(action, "_hyop_module_path", None)
    if not module_path or getattr(action, "_hyop_environment", None) is None:
        return None
    fqn = module_fqn(in_data)
    if fqn is None or not importable_as(fqn, module_path):
        return None
    return fqn


def _run_in_worker(action: Any, in_data: bytes, encoding_errors: str, process_result: Any) -> dict[str, Any]:
    """What ``ActionBase._low_level_execute_command`` returns, for the wrapper run in a fork of this worker."""
    from ansible.module_utils.common.text.converters import to_text

    cwd = to_text(action._loader.get_basedir(), errors="surrogate_or_strict")  # as the local connection does
    rc, stdout, stderr = run_wrapper(in_data, action._hyop_environment or {}, cwd)
    if process_result is not None:  # as ansible-core (2.21 and later) does right after exec_command
        rc, stdout, stderr = process_result(rc, stdout, stderr)
    out = action._strip_success_message(to_text(stdout, errors=encoding_errors))
    err = to_text(stderr, errors=encoding_errors)
    return {"rc": rc, "stdout": out, "stderr": err, "stdout_lines": out.splitlines(), "stderr_lines": err.splitlines()}


def install(shared_root: str) -> None:
    """Patch this process's Ansible (see the module docstring). Idempotent."""
    if _installed:
        return
    from ansible import constants
    from ansible.executor import module_common
    from ansible.plugins.action import ActionBase

    original_configure: Callable[..., Any] = ActionBase._configure_module
    original_environment: Callable[..., Any] = ActionBase._compute_environment_string
    original_execute: Callable[..., Any] = ActionBase._execute_module
    original_low_level: Callable[..., Any] = ActionBase._low_level_execute_command
    original_find: Callable[..., Any] = module_common._find_module_utils

    def _configure_module(self: Any, *args: Any, **kwargs: Any) -> Any:
        module_bits, module_path = original_configure(self, *args, **kwargs)
        self._hyop_module_path = module_path
        return module_bits, module_path

    def _compute_environment_string(self: Any, raw_environment_out: dict[str, Any] | None = None) -> Any:
        raw: dict[str, Any] = {} if raw_environment_out is None else raw_environment_out
        text = original_environment(self, raw)
        self._hyop_environment = {str(key): str(value) for key, value in raw.items()}
        return text

    def _execute_module(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._hyop_module_path = self._hyop_environment = None
        if kwargs.get("wrap_async") or getattr(self._task, "async_val", 0):
            return original_execute(self, *args, **kwargs)
        self._hyop_armed = True
        try:
            return original_execute(self, *args, **kwargs)
        finally:
            self._hyop_armed = False
            self._hyop_module_path = self._hyop_environment = None

    def _low_level_execute_command(
        self: Any,
        cmd: str,
        sudoable: bool = True,
        in_data: bytes | None = None,
        executable: str | None = None,
        encoding_errors: str = "surrogate_then_replace",
        chdir: str | None = None,
        **newer: Any,  # keywords a newer ansible-core added (2.21: process_result)
    ) -> Any:
        fqn = _eligible(self, in_data, sudoable, executable, chdir) if getattr(self, "_hyop_armed", False) else None
        if fqn is None or in_data is None or set(newer) - {"process_result"}:
            return original_low_level(self, cmd, sudoable, in_data, executable, encoding_errors, chdir, **newer)
        return _run_in_worker(self, in_data, encoding_errors, newer.get("process_result"))

    def _find_module_utils(**kwargs: Any) -> Any:
        module_path = str(kwargs.get("module_path") or "")
        if not module_path or not shareable(module_path):
            return original_find(**kwargs)
        digest = hashlib.sha256(module_path.encode() + b"\0" + bytes(kwargs.get("b_module_data") or b""))
        saved = constants.DEFAULT_LOCAL_TMP
        constants.DEFAULT_LOCAL_TMP = os.path.join(shared_root, digest.hexdigest()[:20])
        try:
            return original_find(**kwargs)
        finally:
            constants.DEFAULT_LOCAL_TMP = saved

    ActionBase._configure_module = _configure_module
    ActionBase._compute_environment_string = _compute_environment_string
    ActionBase._execute_module = _execute_module
    ActionBase._low_level_execute_command = _low_level_execute_command
    module_common._find_module_utils = _find_module_utils
    _installed.update(shared_root=shared_root)


# What the hot modules import when they start: loaded once in the zygote, shared by every forked module.
PRELOAD = (
    "ansible.module_utils.basic",
    "ansible.module_utils._internal._ansiballz._loader",
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
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            missing.append(name)
    return missing
