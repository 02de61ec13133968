"""Everything the warm path borrows from the private internals of ansible-core and ansible-runner.

Where it sits: the zygote (``zygote``) resets Ansible's process-wide state in every fork and warms up
without the RPC host; the in-worker module path (``inworker``) hooks four private ``ActionBase`` methods
and ``module_common._find_module_utils``; the in-process task path (``inline``) replaces the strategies'
``WorkerProcess`` and runs ``TaskExecutor`` itself; the executor side (``warm``) asks ansible-runner's
``RunnerConfig`` what to run and reads the output back through ansible-runner's ``OutputEventFilter``.
No other module of the package names a private attribute of either library.

The rules for each touchpoint: its expected shape is written down here, per ansible-core minor where
the minors differ (``SUPPORTED`` is the tested range, the same as pyproject's); its shape is checked
before it is used (``private_state_problems``, ``module_hook_problems``, ``runner_problems``); and when
the shape is not the one expected, the warm path steps aside for Ansible's normal one (a module takes the
real interpreter, a run takes ansible-runner) with one log line, never a failed run. The executor's
start-up self-test (``selftest``) then compares a forked run against the zygote's plain warm-up run.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import inspect
import io
import json
import os
import re
import secrets
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

SUPPORTED = ((2, 19), (2, 22))  # ansible-core: >= first, < second (pyproject.toml pins the same)
# Set to 1, a newer ansible-core than the tested range is tried anyway: the shape checks and the start-up
# self-test still decide (CI's canary does this with the newest release, to see what it moved).
UNTESTED_ENV = "HYBRID_OPERATOR_WARM_UNTESTED_ANSIBLE"
FINDER_WARNING = "AnsibleCollectionFinder has already been configured"  # a fork configures it again


class UnsupportedAnsible(RuntimeError):
    """This ansible-core is outside the tested range, or keeps its private state elsewhere."""


def ansible_version() -> tuple[int, int, str]:
    from ansible.release import __version__  # light: does not load Ansible's configuration

    major, minor = (int(part) for part in __version__.split(".")[:2])
    return major, minor, __version__


def check_version() -> str:
    major, minor, full = ansible_version()
    low, high = SUPPORTED
    if (major, minor) >= high and os.environ.get(UNTESTED_ENV) == "1":
        return full
    if not low <= (major, minor) < high:
        raise UnsupportedAnsible(
            f"ansible-core {full} is not supported by the warm executor (it needs >={low[0]}.{low[1]},"
            f"<{high[0]}.{high[1]}); install a supported ansible-core or use the runner executor"
        )
    return full


# ----------------------------------------------------------------------------- process-wide state (zygote)


@dataclass(frozen=True)
class PrivateState:
    """One piece of process-wide state a playbook run leaves behind, and how to find it."""

    name: str
    why: str
    present: Callable[[], bool]  # the attribute exists where we reset it
    populated: Callable[[], bool]  # a run has filled it (true right after the zygote's warm-up)
    since: tuple[int, int] = SUPPORTED[0]


def _global_cli_args() -> Any:
    return __import__("ansible.utils.context_objects").utils.context_objects.GlobalCLIArgs


def _vault_context() -> Any:
    return getattr(__import__("ansible.parsing.vault").parsing.vault, "VaultSecretsContext", None)


def _vars() -> Any:
    return __import__("ansible.utils.vars").utils.vars


def _display() -> Any:
    return __import__("ansible.utils.display").utils.display.Display()


def _rpc_host() -> Any:
    """ansible-core 2.21's in-process RPC server for its workers (``add_host``, ``group_by``), or None."""
    try:
        from ansible._internal import _rpc_host
    except ImportError:
        return None
    return _rpc_host


def _rpc_host_in_shape() -> bool:
    module = _rpc_host()
    manager = getattr(module, "LocalManager", None)
    return (
        manager is not None
        and "_shared_instance" in vars(manager)
        and isinstance(vars(manager).get("shared_instance"), classmethod)
        and hasattr(getattr(module, "_server_ready", None), "clear")
    )


def _awx_display_modules() -> list[Any]:
    """The loaded copies of ansible-runner's ``awx_display`` callback (its event context is module state)."""
    return [m for m in list(sys.modules.values()) if getattr(m, "__name__", "").endswith("awx_display")]


PRIVATE_STATE = (
    PrivateState(
        "GlobalCLIArgs singleton",
        "holds the parsed command line; a second parse would return the first run's",
        lambda: "_Singleton__instance" in vars(_global_cli_args()),
        lambda: getattr(_global_cli_args(), "_Singleton__instance", None) is not None,
    ),
    PrivateState(
        "ansible.context.CLIARGS",
        "the parsed command line every part of Ansible reads",
        lambda: hasattr(__import__("ansible.context").context, "CLIARGS"),
        lambda: isinstance(__import__("ansible.context").context.CLIARGS, _global_cli_args()),
    ),
    PrivateState(
        "VaultSecretsContext._current",
        "the vault secrets of the run; initialising it twice raises",
        lambda: _vault_context() is not None and "_current" in vars(_vault_context()),
        lambda: getattr(_vault_context(), "_current", None) is not None,
    ),
    PrivateState(
        "load_extra_vars.extra_vars",
        "a function-attribute cache of the run's extra vars: the next run would get these",
        lambda: callable(getattr(_vars(), "load_extra_vars", None)),
        lambda: hasattr(_vars().load_extra_vars, "extra_vars"),
    ),
    PrivateState(
        "load_options_vars.options_vars",
        "a function-attribute cache of ansible_check_mode, ansible_verbosity and friends",
        lambda: callable(getattr(_vars(), "load_options_vars", None)),
        lambda: hasattr(_vars().load_options_vars, "options_vars"),
    ),
    PrivateState(
        "ansible.utils.vars.random_int / cur_id",
        "the per-process part of task and play uuids; forks would all share the zygote's",
        lambda: (
            isinstance(getattr(_vars(), "random_int", None), str)
            and isinstance(_vars().cur_id, int)
            and isinstance(getattr(_vars(), "_MAXSIZE", None), int)
        ),
        lambda: _vars().cur_id > 0,
    ),
    PrivateState(
        "Display de-duplication sets",
        "warnings and deprecations already shown once are not shown again",
        lambda: all(hasattr(getattr(_display(), n, None), "clear") for n in ("_warns", "_deprecations", "_errors")),
        lambda: True,
    ),
    PrivateState(
        "ansible.constants.DEFAULT_LOCAL_TMP",
        "the process's local temp dir (AnsiballZ cache, rendered templates): one per run, as a new process",
        lambda: isinstance(getattr(__import__("ansible.constants").constants, "DEFAULT_LOCAL_TMP", None), str),
        lambda: True,
    ),
    PrivateState(
        "ansible._internal._rpc_host.LocalManager._shared_instance",
        "the RPC server (two threads) a run's workers call back into; each fork must start its own",
        _rpc_host_in_shape,
        lambda: True,  # never started in the zygote (``no_rpc_host``): nothing to fill in
        since=(2, 21),
    ),
    PrivateState(
        "ansible-runner awx_display.event_context",
        "the display callback's job-event context, made when it is imported: it points at the warm-up's dir",
        lambda: all(hasattr(m, "EventContext") and hasattr(m, "event_context") for m in _awx_display_modules()),
        lambda: True,  # not loaded in this process: a fork loads it itself, from its own environment
    ),
)


def private_state_problems(populated: bool, version: tuple[int, int] | None = None) -> list[str]:
    """What of ``PRIVATE_STATE`` is not where this module expects it in the installed ansible-core.

    ``populated``: also require that a run has filled it in (the zygote checks this after its warm-up,
    which proves the reset targets are the ones a real run uses).
    """
    if version is None:
        major, minor, _full = ansible_version()
        version = (major, minor)
    problems = []
    for state in PRIVATE_STATE:
        if version < state.since:
            continue
        try:
            if not state.present():
                problems.append(f"{state.name}: not found")
            elif populated and not state.populated():
                problems.append(f"{state.name}: a run did not fill it in")
        except Exception as exc:  # an import or attribute error is the same news: the shape changed
            problems.append(f"{state.name}: {type(exc).__name__}: {exc}")
    return problems


def reset_private_state() -> None:
    """Put Ansible's process-wide state back as a fresh ``ansible-playbook`` process has it."""
    from ansible import context
    from ansible.utils.context_objects import CLIArgs

    type.__setattr__(_global_cli_args(), "_Singleton__instance", None)
    context.CLIARGS = CLIArgs({})
    vault_context = _vault_context()
    if vault_context is not None:
        vault_context._current = None
    ansible_vars = _vars()
    for function, cache in (
        (ansible_vars.load_extra_vars, "extra_vars"),
        (ansible_vars.load_options_vars, "options_vars"),
    ):
        with contextlib.suppress(AttributeError):
            delattr(function, cache)
    ansible_vars.random_int = f"{secrets.randbelow(ansible_vars._MAXSIZE):08x}"[:8]
    ansible_vars.cur_id = 0
    display = _display()
    for name in ("_warns", "_deprecations", "_errors"):
        getattr(display, name).clear()
    rpc_host = _rpc_host()
    if rpc_host is not None and _rpc_host_in_shape():  # the run starts its own server; its workers call that
        rpc_host.LocalManager._shared_instance = None
        rpc_host._server_ready.clear()


@contextlib.contextmanager
def no_rpc_host() -> Iterator[None]:
    """Run a playbook in this process without starting ansible-core's RPC server (2.21 and later: a thread
    pool and an accepter thread, for workers' ``add_host`` and ``group_by``). It cannot be stopped once
    started, and a process with threads must not fork; the warm-up uses neither task. If its shape moved,
    nothing is changed here and the zygote's thread check refuses to serve (the runner path takes over)."""
    rpc_host = _rpc_host()
    if rpc_host is None or not _rpc_host_in_shape():
        yield
        return
    manager = rpc_host.LocalManager
    original = vars(manager)["shared_instance"]
    manager.shared_instance = classmethod(lambda cls: None)
    try:
        yield
    finally:
        manager.shared_instance = original


def use_local_tmp(path: str | None = None) -> str:
    """Give this process its own local temp dir (Ansible makes one per process at import); the one it has."""
    from ansible import constants

    if path is not None:
        constants.DEFAULT_LOCAL_TMP = path
    return str(constants.DEFAULT_LOCAL_TMP)


def fresh_event_contexts() -> int:
    """Re-create ansible-runner's ``awx_display`` event context from this process's environment (where to
    write job events is read at import, in the zygote's warm-up). How many callback copies were found."""
    modules = [m for m in _awx_display_modules() if hasattr(m, "EventContext")]
    for module in modules:
        module.event_context = module.EventContext()
    return len(modules)


def run_playbook(argv: list[str]) -> int:
    """Be ``ansible-playbook ARGV`` in this process; its exit code."""
    from ansible.cli.playbook import PlaybookCLI

    sys.argv = list(argv)
    try:
        PlaybookCLI.cli_executor(list(argv))
    except SystemExit as exc:
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    return 0


# ------------------------------------------------------------------------------- module hooks (inworker)

# The wrapper ansible-core writes ends with ``_ansiballz_main(... module_fqn='<name>', ...)``, one argument
# per line (ansible/_internal/_ansiballz/_wrapper.py, 2.19-2.21).
_MODULE_FQN = re.compile(rb"^\s*module_fqn=(['\"])([A-Za-z0-9_.]+)\1,$", re.MULTILINE)
_WRAPPER_MARK = b"_ANSIBALLZ_WRAPPER = True"
# ``ActionBase._low_level_execute_command``'s parameters, per minor (2.21 added process_result).
_LOW_LEVEL_PARAMS = {
    (2, 19): ("self", "cmd", "sudoable", "in_data", "executable", "encoding_errors", "chdir"),
    (2, 21): ("self", "cmd", "sudoable", "in_data", "executable", "encoding_errors", "chdir", "process_result"),
}
_HOOKED = ("_configure_module", "_compute_environment_string", "_execute_module", "_low_level_execute_command")
# What every AnsiballZ wrapper imports before its module: preloaded by ``inworker`` (a miss only costs time).
MODULE_PRELOAD = ("ansible.module_utils._internal._ansiballz._loader",)
# One source of the variable names a spec may not set (``reserved``, in a child process): the template
# keywords. (module, attribute); a miss is reported there and the other sources still count.
TEMPLATE_KEYWORDS = ("ansible._internal._templating._jinja_bits", "JINJA_KEYWORDS")
# The mapping keys the extra-vars JSON decoder gives meaning to (``reserved``; refused at any depth of an
# object): (module, class, attribute). A miss is reported there; the ``__ansible_`` prefix is refused anyway.
DECODER_KEYS = ("ansible._internal._json._profiles._legacy", "_Profile", "deserialize_map")


def module_fqn(wrapper: bytes) -> str | None:
    """The Python name of the module an AnsiballZ wrapper runs, or None if ``wrapper`` is not one."""
    if _WRAPPER_MARK not in wrapper:
        return None
    match = _MODULE_FQN.search(wrapper)
    return match.group(2).decode() if match else None


def to_module_side() -> None:
    """Undo what importing Ansible's controller did to ``ansible.module_utils``: a module process runs with
    ``is_controller`` false (warnings go into the result) and the module-side traceback switch."""
    from ansible.module_utils import _internal
    from ansible.module_utils._internal import _traceback

    _internal.is_controller = False
    _traceback._is_traceback_enabled = _traceback._is_module_traceback_enabled


def _expected(table: dict[tuple[int, int], tuple[str, ...]]) -> tuple[str, ...]:
    major, minor, _full = ansible_version()
    return table[max(v for v in table if v <= (major, minor))]


def module_hook_problems() -> list[str]:
    """Why the module hooks cannot be installed in this ansible-core (empty: they can)."""
    try:
        from ansible.executor import module_common
        from ansible.module_utils import _internal
        from ansible.module_utils._internal import _traceback
        from ansible.plugins.action import ActionBase

        problems = [
            f"ActionBase.{name}: not found" for name in _HOOKED if not callable(getattr(ActionBase, name, None))
        ]
        if not problems:
            found = tuple(inspect.signature(ActionBase._low_level_execute_command).parameters)
            if found != _expected(_LOW_LEVEL_PARAMS):
                problems.append(f"ActionBase._low_level_execute_command{found}: not the expected parameters")
        find = inspect.signature(module_common._find_module_utils).parameters
        if any(name not in find for name in ("module_path", "b_module_data")):
            problems.append("module_common._find_module_utils: no module_path/b_module_data parameter")
        if not hasattr(_internal, "is_controller") or not hasattr(_traceback, "_is_module_traceback_enabled"):
            problems.append("ansible.module_utils._internal: no is_controller/_is_module_traceback_enabled")
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


@dataclass(frozen=True)
class ModulePolicy:
    """What ``inworker`` decides: whether the module at a path, built under a name, may run in this worker;
    whether its built zip may be shared between runs; and how to run a wrapper here."""

    runs_here: Callable[[str, str], bool]  # (fqn, module path)
    shareable: Callable[[str], bool]  # module path
    run: Callable[[bytes, dict[str, str], str | None], tuple[int, bytes, bytes]]  # (wrapper, env, cwd)


def _eligible(
    action: Any, policy: ModulePolicy, in_data: object, sudoable: bool, executable: object, chdir: object
) -> bool:
    """Whether this pipelined command is a module the policy lets run in this worker (else Ansible's path)."""
    connection = action._connection
    if not getattr(action, "_hyop_armed", False) or not isinstance(in_data, bytes) or executable is not None or chdir:
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
    rc, stdout, stderr = policy.run(in_data, action._hyop_environment or {}, cwd)
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
        module_bits, module_path = original["_configure_module"](self, *args, **kwargs)
        self._hyop_module_path = module_path
        return module_bits, module_path

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
        if set(newer) - {"process_result"} or not _eligible(self, policy, in_data, sudoable, executable, chdir):
            args = (self, cmd, sudoable, in_data, executable, encoding_errors, chdir)
            return original["_low_level_execute_command"](*args, **newer)
        return _run_in_worker(self, policy, in_data, encoding_errors, newer.get("process_result"))

    def _find_module_utils(*args: Any, **kwargs: Any) -> Any:
        module_path = str(kwargs.get("module_path") or "")
        if args or not module_path or not policy.shareable(module_path):  # positional (2.18): as it was
            return original_find(*args, **kwargs)
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


# ------------------------------------------------------------------------------ in-process tasks (inline)

# The minors whose ``WorkerProcess._run`` ``run_task_inline`` mirrors line by line (2.19 and 2.20 build the
# result differently: they keep the worker fork). A newer minor is only tried under ``UNTESTED_ENV``.
_INLINE_MINORS = ((2, 21),)
_TASK_EXECUTOR_PARAMS = ("self", "host", "play_context", "loader", "shared_loader_obj", "final_q", "variable_manager")


def inline_task_problems() -> list[str]:
    """Why ``hook_inline_tasks`` cannot be installed in this ansible-core (empty: it can)."""
    major, minor, full = ansible_version()
    if not any(
        (major, minor) == known or ((major, minor) > known and os.environ.get(UNTESTED_ENV) == "1")
        for known in _INLINE_MINORS
    ):
        return [f"ansible-core {full}: tasks run in-process only on {_INLINE_MINORS} (its worker differs)"]
    try:
        from ansible._internal import _task
        from ansible.executor import task_queue_manager
        from ansible.executor.process import worker
        from ansible.executor.task_executor import TaskExecutor
        from ansible.plugins import strategy

        problems = []
        if getattr(strategy, "WorkerProcess", None) is not worker.WorkerProcess:
            problems.append("ansible.plugins.strategy.WorkerProcess: not ansible's WorkerProcess")
        if tuple(inspect.signature(TaskExecutor.__init__).parameters) != _TASK_EXECUTOR_PARAMS:
            problems.append("TaskExecutor.__init__: not the expected parameters")
        if not callable(getattr(getattr(_task, "TaskContext", None), "create", None)):
            problems.append("ansible._internal._task.TaskContext.create: not found")
        if not callable(getattr(task_queue_manager.FinalQueue, "send_task_result", None)):
            problems.append("FinalQueue.send_task_result: not found")
        if not callable(getattr(getattr(_task, "UnifiedTaskResult", None), "create_from_action_exception", None)):
            problems.append("UnifiedTaskResult.create_from_action_exception: not found")
        for name in ("_task", "_task_vars", "_host", "_play_context", "_loader", "_final_q"):
            if f"self.{name} = " not in inspect.getsource(worker.WorkerProcess.__init__):
                problems.append(f"WorkerProcess.{name}: not set by its constructor")
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def run_task_inline(worker: Any) -> None:
    """What ``WorkerProcess.run`` does in its forked child, done in this process: run the task through a
    ``TaskExecutor`` and put the result on the run's results queue, where the strategy reads it.

    Differences, each on purpose: the task is a copy (a worker's fork gets one for free; ``squash`` and
    the executor's templating change it in place, and a handler may run again); stdio is left alone and
    ``Display`` is not proxied (this process is the one that prints); the worker's hard exit on an
    unexpected error becomes a failed result for that task, as its queue-send failure path builds one."""
    from ansible._internal import _task
    from ansible.executor.task_executor import TaskExecutor

    task = worker._task.copy()
    host = worker._host
    try:
        with _task.TaskContext.create(task=task, task_vars=worker._task_vars, host_name=host.name):
            task.squash()
            executor = TaskExecutor(
                host,
                worker._play_context,
                worker._loader,
                worker._shared_loader_obj,
                worker._final_q,
                worker._variable_manager,
            )
            utr = executor.run()
            utr.finalize_registered_values()
    except Exception as exc:
        utr = _task.UnifiedTaskResult.create_from_action_exception(exc)
        utr.finalize_registered_values()
    task.ignore_errors = utr.ignore_errors  # as the worker does: callbacks read the post-loop values
    task.ignore_unreachable = utr.ignore_unreachable
    worker._final_q.send_task_result(host, task, utr)


def hook_inline_tasks(runs_here: Callable[[str, object, bool], bool]) -> None:
    """Make every strategy's worker run a task in this process when ``runs_here(action, connection,
    delegated)`` says so, and fork Ansible's ``WorkerProcess`` as usual otherwise. Check
    ``inline_task_problems`` first."""
    from ansible.executor.process.worker import WorkerProcess
    from ansible.plugins import strategy

    class InlineWorker(WorkerProcess):  # type: ignore[misc]  # Ansible is untyped here
        """A worker slot that, for an eligible task, runs it at ``start`` and is never alive after."""

        def start(self) -> None:
            connection = self._task_vars.get("ansible_connection", self._play_context.connection)
            if runs_here(str(self._task.action), connection, bool(self._task.delegate_to)):
                run_task_inline(self)  # never started as a process: ``is_alive`` is False, ``close`` is a no-op
            else:
                super().start()

    strategy.WorkerProcess = InlineWorker


# ------------------------------------------------------------------------------- ansible-runner (warm)


@dataclass(frozen=True)
class RunnerCommand:
    """What ansible-runner would run for one run's options: the command, environment, cwd and timeout."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    timeout: int | None
    artifact_dir: Path


def runner_command(options: dict[str, Any]) -> RunnerCommand:
    """Ask ansible-runner's ``RunnerConfig`` (what ``ansible_runner.run`` builds) for the run's command."""
    from ansible_runner.config.runner import RunnerConfig

    config = RunnerConfig(**options)
    config.prepare()
    return RunnerCommand(
        argv=[str(arg) for arg in config.command],
        env={str(k): str(v) for k, v in config.env.items()},
        cwd=str(config.cwd),
        timeout=int(config.job_timeout) if config.job_timeout else None,
        artifact_dir=Path(config.artifact_dir),
    )


def runner_problems() -> list[str]:
    """Why ``runner_command`` and ``replay_output`` cannot work with the installed ansible-runner."""
    try:
        from ansible_runner.config.runner import RunnerConfig
        from ansible_runner.utils import OutputEventFilter

        if not callable(getattr(RunnerConfig, "prepare", None)):
            return ["RunnerConfig.prepare: not found"]
        wanted = ["handle", "event_callback", "suppress_ansible_output"]
        if list(inspect.signature(OutputEventFilter).parameters)[:3] != wanted:
            return ["OutputEventFilter: not the expected parameters"]
    except Exception as exc:
        return [f"ansible-runner: {type(exc).__name__}: {exc}"]
    return []


def _opened(raw: Path, follow: threading.Event | None) -> BinaryIO:
    """The run's raw output; when following, waited for until the run has created it (or has ended)."""
    while follow is not None and not follow.is_set() and not raw.exists():
        follow.wait(0.05)
    if follow is not None and not raw.exists():
        return io.BytesIO()  # the run ended without output
    return raw.open("rb")


def replay_output(
    raw: Path,
    stdout: Path,
    events_dir: Path,
    on_event: Callable[[dict[str, Any]], None],
    follow: threading.Event | None = None,
) -> None:
    """Read a run's raw output as ansible-runner reads its pty: the ``stdout`` artifact and each job event
    (with its ``-partial.json`` from the display callback merged in, as ``Runner.event_callback`` does).
    The raw output has "\\n" where ansible-runner's terminal gives "\\r\\n": that is done here.
    With ``follow``, the file is read while the run writes it, until ``follow`` is set and all is read."""
    from ansible_runner.utils import OutputEventFilter

    def merged(event: dict[str, Any]) -> None:
        if "uuid" not in event:
            return
        partial = events_dir / f"{event['uuid']}-partial.json"
        with contextlib.suppress(OSError, ValueError):
            event.update(json.loads(partial.read_text(encoding="utf-8")))
            partial.unlink()
        on_event(event)

    fd = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    output = OutputEventFilter(os.fdopen(fd, "w", encoding="utf-8"), merged, suppress_ansible_output=True)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        with _opened(raw, follow) as source:
            while True:
                chunk = source.read(4096)  # pexpect hands over small reads too
                if not chunk:
                    if follow is None or follow.is_set():
                        break
                    follow.wait(0.05)  # the run is still writing
                    continue
                output.write(decoder.decode(chunk).replace("\n", "\r\n"))
        if tail := decoder.decode(b"", final=True):
            output.write(tail.replace("\n", "\r\n"))
    except FileNotFoundError:
        pass
    finally:
        output.close()
