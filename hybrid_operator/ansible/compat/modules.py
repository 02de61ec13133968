"""The module hooks of the in-worker path (``warm.inworker``): four private ``ActionBase`` methods and
``module_common._find_module_utils``, per minor, with the shape checked before use (``module_hook_problems``).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hybrid_operator.ansible.compat.versions import per_minor

# Where the wrapper ansible-core writes names the module it runs, per minor: 2.18 calls
# ``runpy.run_module(mod_name='<name>', init_globals=...)`` (ansible/executor/module_common.py); 2.19-2.21
# end with ``_ansiballz_main(... module_fqn='<name>', ...)``, one argument per line
# (ansible/_internal/_ansiballz/_wrapper.py).
_MODULE_FQN = {
    (2, 18): re.compile(rb"^\s*runpy\.run_module\(mod_name=(['\"])([A-Za-z0-9_.]+)\1, init_globals=dict\(", re.M),
    (2, 19): re.compile(rb"^\s*module_fqn=(['\"])([A-Za-z0-9_.]+)\1,$", re.MULTILINE),
}
_WRAPPER_MARK = b"_ANSIBALLZ_WRAPPER = True"
_LOW_LEVEL = ("self", "cmd", "sudoable", "in_data", "executable", "encoding_errors", "chdir")
# ``ActionBase._low_level_execute_command``'s parameters, per minor (2.21 added process_result).
_LOW_LEVEL_PARAMS = {(2, 18): _LOW_LEVEL, (2, 21): (*_LOW_LEVEL, "process_result")}
_HOOKED = ("_configure_module", "_compute_environment_string", "_execute_module", "_low_level_execute_command")
# What every AnsiballZ wrapper imports before its module, per minor: preloaded by ``inworker`` (a miss only
# costs time). 2.18's wrapper imports nothing of Ansible's before ``basic``, which ``inworker`` preloads.
_MODULE_PRELOAD: dict[tuple[int, int], tuple[str, ...]] = {
    (2, 18): (),
    (2, 19): (
        "ansible.module_utils._internal._ansiballz._loader",
        # The JSON profiles a module's arguments are encoded with and its result decoded with (imported by
        # name the first time a run calls a module: each run did it again).
        "ansible.module_utils._internal._json._profiles._module_legacy_c2m",
        "ansible.module_utils._internal._json._profiles._module_legacy_m2c",
        "ansible.module_utils._internal._json._profiles._module_modern_c2m",
        "ansible.module_utils._internal._json._profiles._module_modern_m2c",
    ),
}


# Whether ``ansible.module_utils`` has a controller mode (``_internal.is_controller``) to switch off.
_CONTROLLER_MODE = {(2, 18): False, (2, 19): True}


def module_preload() -> tuple[str, ...]:
    return per_minor(_MODULE_PRELOAD)


def module_fqn(wrapper: bytes) -> str | None:
    """The Python name of the module an AnsiballZ wrapper runs, or None if ``wrapper`` is not one."""
    if _WRAPPER_MARK not in wrapper:
        return None
    match = per_minor(_MODULE_FQN).search(wrapper)
    return match.group(2).decode() if match else None


def to_module_side() -> None:
    """Undo what Ansible's controller did to ``ansible.module_utils`` in this process, so a module here runs
    as in a new interpreter. 2.19 and later: ``is_controller`` false (warnings go into the result) and the
    module-side traceback switch. 2.18: no warnings or deprecations collected yet (the controller's own
    argument-spec checks add to the same lists a module returns)."""
    if per_minor(_CONTROLLER_MODE):
        from ansible.module_utils import _internal
        from ansible.module_utils._internal import _traceback

        _internal.is_controller = False
        _traceback._is_traceback_enabled = _traceback._is_module_traceback_enabled
    else:
        from ansible.module_utils.common import warnings

        warnings._global_warnings.clear()
        warnings._global_deprecations.clear()


def _module_side_problems() -> list[str]:
    """Why ``to_module_side`` cannot work in the installed ansible-core (empty: it can)."""
    if per_minor(_CONTROLLER_MODE):
        from ansible.module_utils import _internal
        from ansible.module_utils._internal import _traceback

        if not hasattr(_internal, "is_controller") or not hasattr(_traceback, "_is_module_traceback_enabled"):
            return ["ansible.module_utils._internal: no is_controller/_is_module_traceback_enabled"]
        return []
    from ansible.module_utils.common import warnings

    lists = (getattr(warnings, "_global_warnings", None), getattr(warnings, "_global_deprecations", None))
    return [] if all(isinstance(x, list) for x in lists) else ["module_utils.common.warnings: no global lists"]


def module_hook_problems() -> list[str]:
    """Why the module hooks cannot be installed in this ansible-core (empty: they can)."""
    try:
        from ansible.executor import module_common
        from ansible.plugins.action import ActionBase

        problems = [
            f"ActionBase.{name}: not found" for name in _HOOKED if not callable(getattr(ActionBase, name, None))
        ]
        if not problems:
            found = tuple(inspect.signature(ActionBase._low_level_execute_command).parameters)
            if found != per_minor(_LOW_LEVEL_PARAMS):
                problems.append(f"ActionBase._low_level_execute_command{found}: not the expected parameters")
        find = inspect.signature(module_common._find_module_utils).parameters
        if any(name not in find for name in ("module_path", "b_module_data")):
            problems.append("module_common._find_module_utils: no module_path/b_module_data parameter")
        problems += _module_side_problems()
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


# (fqn, wrapper, env, cwd) -> (rc, stdout, stderr) of the module run in this very process, or None to fork it
InProcess = Callable[[str, bytes, dict[str, str], str | None], tuple[int, bytes, bytes] | None]


@dataclass(frozen=True)
class ModulePolicy:
    """What ``inworker`` decides: whether the module at a path, built under a name, may run in this worker;
    whether its built zip may be shared between runs; and how to run a wrapper here."""

    runs_here: Callable[[str, str], bool]  # (fqn, module path)
    shareable: Callable[[str], bool]  # module path
    run: Callable[[bytes, dict[str, str], str | None], tuple[int, bytes, bytes]]  # (wrapper, env, cwd)
    in_process: InProcess | None = None  # the module run in this very process (``warm.lean``), or fork as above


def runs_this_interpreter(cmd: str) -> bool:
    """Whether a pipelined module command runs this very Python (its last word, after any environment
    assignments). An inventory may name another interpreter for the host (``ansible_python_interpreter``),
    whose libraries are not ours: such a module takes Ansible's path and that interpreter."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return False
    return bool(words) and words[-1] == sys.executable


def _eligible(
    action: Any, policy: ModulePolicy, cmd: str, in_data: object, sudoable: bool, executable: object, chdir: object
) -> bool:
    """Whether this pipelined command is a module the policy lets run in this worker (else Ansible's path)."""
    connection = action._connection
    if not getattr(action, "_hyop_armed", False) or not isinstance(in_data, bytes) or executable is not None or chdir:
        return False
    if not isinstance(cmd, str) or not runs_this_interpreter(cmd):
        return False
    if getattr(connection, "transport", None) != "local" or (sudoable and getattr(connection, "become", None)):
        return False
    module_path, fqn = getattr(action, "_hyop_module_path", None), module_fqn(in_data)
    if not module_path or not fqn or getattr(action, "_hyop_environment", None) is None:
        return False
    return policy.runs_here(fqn, str(module_path))


def _run_in_worker(action: Any, policy: ModulePolicy, in_data: Any, encoding_errors: str, process_result: Any) -> Any:
    """What ``_low_level_execute_command`` returns, for the wrapper run through ``policy.run`` here."""
    from ansible.module_utils.common.text.converters import to_text

    cwd = to_text(action._loader.get_basedir(), errors="surrogate_or_strict")  # as the local connection does
    env = action._hyop_environment or {}
    here = policy.in_process(module_fqn(in_data) or "", in_data, env, cwd) if policy.in_process else None
    rc, stdout, stderr = here if here is not None else policy.run(in_data, env, cwd)
    if process_result is not None:  # as 2.21 does right after exec_command
        rc, stdout, stderr = process_result(rc, stdout, stderr)
    out = action._strip_success_message(to_text(stdout, errors=encoding_errors))
    err = to_text(stderr, errors=encoding_errors)
    return {"rc": rc, "stdout": out, "stderr": err, "stdout_lines": out.splitlines(), "stderr_lines": err.splitlines()}


def hook_modules(policy: ModulePolicy, shared_root: str) -> None:
    """Hook ``ActionBase`` so an eligible pipelined module task runs through ``policy.run`` in this worker,
    and ``_find_module_utils`` so shareable zips are cached under ``shared_root``. Check
    ``module_hook_problems`` first. Anything unexpected at run time takes Ansible's own path."""
    from ansible import constants
    from ansible.executor import module_common
    from ansible.plugins.action import ActionBase

    original = {name: getattr(ActionBase, name) for name in _HOOKED}
    original_find: Callable[..., Any] = module_common._find_module_utils

    def _configure_module(self: Any, *args: Any, **kwargs: Any) -> Any:
        configured = original["_configure_module"](self, *args, **kwargs)
        self._hyop_module_path = configured[-1]  # 2.18: (style, shebang, data, path); later: (bits, path)
        return configured

    def _compute_environment_string(self: Any, raw_environment_out: dict[str, Any] | None = None) -> Any:
        raw: dict[str, Any] = {} if raw_environment_out is None else raw_environment_out
        text = original["_compute_environment_string"](self, raw)
        self._hyop_environment = {str(key): str(value) for key, value in raw.items()}
        return text

    def _execute_module(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._hyop_module_path = self._hyop_environment = None
        self._hyop_armed = not (kwargs.get("wrap_async") or getattr(self._task, "async_val", 0))
        try:
            return original["_execute_module"](self, *args, **kwargs)
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
        **newer: Any,  # what a newer minor added (2.21: process_result)
    ) -> Any:
        if set(newer) - {"process_result"} or not _eligible(self, policy, cmd, in_data, sudoable, executable, chdir):
            args = (self, cmd, sudoable, in_data, executable, encoding_errors, chdir)
            return original["_low_level_execute_command"](*args, **newer)
        return _run_in_worker(self, policy, in_data, encoding_errors, newer.get("process_result"))

    find_signature = inspect.signature(original_find)

    def _find_module_utils(*args: Any, **kwargs: Any) -> Any:
        try:  # 2.18 passes everything by position, 2.19 and later by keyword
            given = find_signature.bind(*args, **kwargs).arguments
        except TypeError:
            given = {}
        module_path, module_data = str(given.get("module_path") or ""), given.get("b_module_data")
        if not module_path or not isinstance(module_data, bytes) or not policy.shareable(module_path):
            return original_find(*args, **kwargs)
        digest = hashlib.sha256(module_path.encode() + b"\0" + module_data)
        saved = constants.DEFAULT_LOCAL_TMP
        constants.DEFAULT_LOCAL_TMP = os.path.join(shared_root, digest.hexdigest()[:20])
        try:
            return original_find(*args, **kwargs)
        finally:
            constants.DEFAULT_LOCAL_TMP = saved

    ActionBase._configure_module = _configure_module
    ActionBase._compute_environment_string = _compute_environment_string
    ActionBase._execute_module = _execute_module
    ActionBase._low_level_execute_command = _low_level_execute_command
    module_common._find_module_utils = _find_module_utils
