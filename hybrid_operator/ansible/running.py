"""Running one reconcile: the ``Executor`` interface and its ansible-runner implementation.

The reactor hands an executor a ``RunRequest`` (which kind, which object, which role or playbook, which
extra vars) and gets a ``RunResult`` back; nothing else crosses the boundary, so a faster backend can
replace ansible-runner without touching the reactor. ``RunnerExecutor`` starts one ansible-runner run
per reconcile in the run's own private data dir, streams its events into ``results.EventCollector``,
scrubs the environment out of the ``command`` artifact, and hands the dir to the ``ArtifactStore``.
``RunSetup`` is what it shares with the warm executor (``warm``), so both make every run the same way.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import ansible_runner

from hybrid_operator.ansible import inputdir, reaping
from hybrid_operator.ansible.artifacts import ArtifactStore
from hybrid_operator.ansible.modserver import SOCKET_PATH_MAX, ModuleServer
from hybrid_operator.ansible.privatedirs import TempDir, ensure_private_dir, write_private_file
from hybrid_operator.ansible.results import EventCollector, RunResult
from hybrid_operator.ansible.runsite import sitecustomize

log = logging.getLogger(__name__)

# The collections shipped inside the package (hybrid_operator.util, and operator_sdk.util as a fallback
# for roles written for operator-sdk). Appended after the user's paths, so an installed
# operator_sdk.util from Galaxy wins over ours.
BUNDLED_COLLECTIONS = Path(__file__).resolve().parent.parent / "collections"


@dataclass(frozen=True)
class RunRequest:
    """Everything one run needs: which object, what to run, with which vars."""

    run_id: str
    group: str
    version: str
    kind: str
    obj: Mapping[str, Any]
    role: str | None = None
    playbook: Path | None = None
    watch_vars: Mapping[str, Any] = field(default_factory=dict)
    finalizer_vars: Mapping[str, Any] | None = None
    snake_case: bool = True
    mark_unsafe: bool = True
    max_artifacts: int = 20
    verbosity: int = 0
    env: Mapping[str, str] = field(default_factory=dict)
    # Sees each of the run's events as it arrives (the warm executor then follows its output live).
    on_event: Callable[[dict[str, Any]], None] | None = field(default=None, compare=False)
    # Gets the result as soon as it is known, before the executor writes the run's job event artifacts
    # (the warm executor: the status need not wait for ~50 small files). An exception it raises comes out
    # of ``run`` once the artifacts are written. An executor may not call it: then it is the caller's to do.
    on_result: Callable[[RunResult], None] | None = field(default=None, compare=False)

    @property
    def namespace(self) -> str:
        return str((self.obj.get("metadata") or {}).get("namespace") or "")

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name") or "")

    def extravars(self) -> dict[str, Any]:
        return inputdir.build_extravars(
            self.obj,
            group=self.group,
            kind=self.kind,
            snake_case=self.snake_case,
            unsafe=self.mark_unsafe,
            watch_vars=self.watch_vars,
            finalizer_vars=self.finalizer_vars,
        )


class Executor(Protocol):
    """Runs reconciles. Implementations must be safe to call from several worker threads at once.

    A ``lifecycle.Runnable``: ``start`` begins what warms it up, ``stop`` is ``close``.
    """

    def run(self, request: RunRequest) -> RunResult: ...

    def start(self) -> None: ...

    def stop(self, deadline: float) -> bool: ...

    def ready(self) -> tuple[bool, str]:
        """Whether a run can start now, and why not."""
        ...

    def close(self) -> None: ...


@dataclass
class ExecutorSettings:
    artifacts_root: Path
    artifacts_max_bytes: int = 1 << 30
    timeout: float = 600.0
    ansible_args: str = ""
    roles_paths: tuple[Path, ...] = ()
    collections_paths: tuple[Path, ...] = ()
    module_server: bool = True  # run modules in forks of a warm process (modserver) instead of new interpreters
    inventory: Path | None = None  # ANSIBLE_INVENTORY (a file or a directory); None: localhost, our Python
    run_memory: int = 0  # bytes each process of a run may grow by (RLIMIT_DATA, see runsite); 0: unbounded
    prepared_dirs: tuple[Path, ...] = ()  # roles (or dirs of roles) the warm executor prepares ahead (executors)
    prepared_playbooks: tuple[Path, ...] = ()  # playbooks watches.yaml names: the warm executor loads them ahead


RUNSITE = Path(__file__).resolve().parent / "runsite"  # its sitecustomize: see there


def run_pythonpath() -> str:
    """``PYTHONPATH`` for every process of a run: ``RUNSITE`` first, then the operator's own, if any."""
    return os.pathsep.join(p for p in (str(RUNSITE), os.environ.get("PYTHONPATH", "")) if p)


def ansible_environment(settings: ExecutorSettings) -> dict[str, str]:
    """Environment every run gets on top of the operator's own."""
    collections = [str(p) for p in settings.collections_paths]
    user = os.environ.get("ANSIBLE_COLLECTIONS_PATH") or os.environ.get("ANSIBLE_COLLECTIONS_PATHS")
    if user:
        collections.append(user)
    else:  # keep Ansible's defaults reachable (site-packages holds the `ansible` package's collections)
        collections.append(os.path.expanduser("~/.ansible/collections:/usr/share/ansible/collections"))
    collections.append(str(BUNDLED_COLLECTIONS))
    env = {
        # ansible-runner looks ansible-playbook up on PATH: make it the one beside our Python.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        # Every interpreter of a run checks Kubernetes names before a URL is built from them (runsite).
        "PYTHONPATH": run_pythonpath(),
        "ANSIBLE_COLLECTIONS_PATH": ":".join(collections),
        "ANSIBLE_RETRY_FILES_ENABLED": "false",
        "ANSIBLE_NOCOLOR": "true",
        "ANSIBLE_HOST_KEY_CHECKING": "false",
        "ANSIBLE_DEPRECATION_WARNINGS": "false",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
    }
    if settings.run_memory > 0:
        env[sitecustomize.MEMORY_ENV] = str(settings.run_memory)
    roles = [str(p) for p in settings.roles_paths]
    if os.environ.get("ANSIBLE_ROLES_PATH"):
        roles.append(os.environ["ANSIBLE_ROLES_PATH"])
    if roles:
        env["ANSIBLE_ROLES_PATH"] = ":".join(roles)
    return env


# What a run puts below its TMPDIR for a Unix socket: multiprocessing's "/pymp-XXXXXXXX/listener-XXXXXXXX"
# (ansible-core 2.21 serves its workers over one).
UNIX_SOCKET_TAIL = 32


def runs_temp_dir(scratch: Path) -> Path | None:
    """The private temp dir every run of an executor gets as its TMPDIR, or None to leave the runs the
    operator's own.

    Libraries keep files in the temp dir under names anyone can compute and trust what they find:
    kubernetes.core's discovery cache is named after the API address (the run proxy's, logged at start) and
    the user, and a module that finds one maps kinds to API paths with it. In a shared /tmp another local
    user could plant it first. A dir inside the executor's private scratch dir cannot be planted in; all the
    executor's runs share it, so the cache still serves them all, and it goes with the executor. When the
    scratch dir is so deep that a run's Unix sockets below it would pass the length a socket's path may have
    (a long TMPDIR), the runs keep the operator's TMPDIR, as before, and a warning says so and what to do.
    """
    path = scratch / "tmp"
    room = SOCKET_PATH_MAX - UNIX_SOCKET_TAIL - len(os.fsencode(path))
    if room < 0:
        base = tempfile.gettempdir()
        log.warning(
            "runs use the operator's temp dir %s: a private one inside %s would be too long for the Unix "
            "sockets Ansible makes there; set TMPDIR to a shorter directory (at most %d bytes before our own "
            "dirs are added) so that files another user leaves in a shared temp dir cannot reach the runs",
            base,
            scratch,
            len(os.fsencode(base)) + room,
        )
        return None
    return ensure_private_dir(path)


class RunSetup:
    """What every run of one executor shares, and how one run's inputs are made.

    Shared by ``RunnerExecutor`` and the warm executor (``warm``), so both run the same command in the
    same environment: the artifact store, the environment every run gets, the wrapper playbooks that run
    a role, and the module server the inventory's Python points at.
    """

    def __init__(self, settings: ExecutorSettings, module_server: bool = True) -> None:
        """``module_server=False``: warm modules without the module server process (the warm executor
        runs them in Ansible's workers; what cannot run there gets the real interpreter)."""
        self.settings = settings
        self.store = ArtifactStore(settings.artifacts_root, settings.artifacts_max_bytes)
        self.env = ansible_environment(settings)
        # This executor's own files: the wrapper playbooks and the module server's socket. A new private
        # dir, removed by close(), never one found on disk: Ansible also reads group_vars/, host_vars/ and
        # plugin dirs beside a playbook, so nothing another user could have put there may be near one.
        self.scratch = TempDir("hyop-")
        self._wrapper_dir = ensure_private_dir(self.scratch.path / "playbooks")
        # The runs' TMPDIR: this executor's own, never the shared /tmp (see ``runs_temp_dir``).
        if (runs_tmp := runs_temp_dir(self.scratch.path)) is not None:
            self.env["TMPDIR"] = str(runs_tmp)
        self._wrappers: dict[str, Path] = {}  # role -> its wrapper, written by this executor
        self._wrappers_lock = threading.Lock()
        self.python = sys.executable
        self.modules: ModuleServer | None = None
        if settings.module_server:
            self.env["ANSIBLE_PIPELINING"] = "true"  # the module arrives on stdin: no temp file per task
        if settings.module_server and module_server:
            # A short private path: Unix socket paths are limited to about 100 bytes.
            self.modules = ModuleServer(self.scratch.path)
            self.modules.start({"PYTHONPATH": self.env["PYTHONPATH"]})
            self.python = str(self.modules.client)

    def close(self) -> None:
        if self.modules is not None:
            self.modules.stop()
        self.scratch.close()

    def new_run_dir(self, request: RunRequest) -> Path:
        object_path = (request.group, request.version, request.kind, request.namespace, request.name)
        return self.store.new_run_dir(object_path, request.run_id)

    def playbook_for(self, request: RunRequest) -> Path:
        if request.playbook is not None:
            return request.playbook
        assert request.role is not None
        return self.wrapper_for(request.role)

    def wrapper_for(self, role: str) -> Path:
        """The wrapper playbook that runs ``role`` (a name on the roles path, or a role's path)."""
        with self._wrappers_lock:  # written once per executor, by this executor: never read from disk first
            path = self._wrappers.get(role)
            if path is None:
                # The digest keeps roles apart whose names flatten alike ("a/b" and "a_b").
                digest = hashlib.sha256(role.encode()).hexdigest()[:8]
                name = f"{role.strip('/').replace('/', '_')}-{digest}.yml"
                path = write_private_file(self._wrapper_dir / name, inputdir.role_playbook(role))
                self._wrappers[role] = path
        return path

    def write_input(self, run_dir: Path, request: RunRequest) -> None:
        """Write a run's private data dir: its extra vars, and the project's inventory (``ANSIBLE_INVENTORY``)
        or the generated ``localhost`` one. Raises OSError when the inventory cannot be copied."""
        inputdir.write_private_dir(run_dir, request.extravars(), self.python, self.settings.inventory)

    def runner_options(self, request: RunRequest, run_dir: Path) -> dict[str, Any]:
        """The ``ansible_runner.run`` keyword arguments of one run (its private data dir already written).

        The warm executor hands the same options to ansible-runner's ``RunnerConfig`` to learn the command,
        environment and working directory ansible-runner would use, so both executors run the same thing.
        """
        return {
            "private_data_dir": str(run_dir),
            "playbook": str(self.playbook_for(request)),
            "ident": request.run_id,
            # The run's id marks every process it starts, so what it leaves behind can be found (reaping).
            "envvars": {**self.env, **request.env, reaping.RUN_ENV: request.run_id},
            "suppress_env_files": True,
            "quiet": True,
            "verbosity": request.verbosity or None,
            "cmdline": self.settings.ansible_args or None,
            "timeout": int(self.settings.timeout),
            "settings": {"suppress_ansible_output": True},
        }


class RunnerExecutor:
    """One ``ansible_runner.run`` per reconcile: the operator-sdk-compatible baseline backend."""

    def __init__(self, settings: ExecutorSettings) -> None:
        self.settings = settings
        self.setup = RunSetup(settings)
        self.store = self.setup.store

    def start(self) -> None:
        pass  # nothing to warm up: each run is a new process (the module server started with the setup)

    def stop(self, deadline: float) -> bool:
        self.close()
        return True

    def ready(self) -> tuple[bool, str]:
        return runner_ready(self.setup)

    def close(self) -> None:
        self.setup.close()

    def run(self, request: RunRequest) -> RunResult:
        return run_with_runner(self.setup, request)


def runner_ready(setup: RunSetup) -> tuple[bool, str]:
    """Whether ansible-runner can start a run now (also the warm executor's, once it switched itself off)."""
    if shutil.which("ansible-playbook", path=setup.env["PATH"]) is None:
        return False, "ansible-playbook not found on PATH"
    if setup.modules is not None and not setup.modules.alive():
        return False, "the module server died"
    return True, "ok"


def run_with_runner(
    setup: RunSetup, request: RunRequest, run_dir: Path | None = None, *, input_written: bool = False
) -> RunResult:
    """One run through ``ansible_runner.run``: Ansible's normal path (``run_dir``: one already made for it,
    ``input_written``: with its input already in it)."""
    started = time.monotonic()
    run_dir = setup.new_run_dir(request) if run_dir is None else run_dir
    collector = EventCollector(request.run_id, request.on_event)
    try:
        if not input_written:
            setup.write_input(run_dir, request)
        runner = ansible_runner.run(**setup.runner_options(request, run_dir), event_handler=_collect_into(collector))
        result = finished_result(collector, runner.rc, runner.status, run_dir / "artifacts" / request.run_id)
    except Exception as exc:  # an executor bug or a broken install must not kill the worker
        log.exception("ansible-runner failed to run", extra={"run_id": request.run_id})
        result = collector.result
        result.error = f"could not run Ansible: {exc}"
    finally:
        _stop_left_behind(request.run_id, collector.result)
        _scrub_command_artifact(run_dir / "artifacts" / request.run_id / "command")
        setup.store.finish(run_dir, request.max_artifacts)
    result.duration = time.monotonic() - started
    return result


def _stop_left_behind(run_id: str, result: RunResult) -> None:
    """A run ansible-runner stopped at its timeout (it kills the run's process group only) or that did not
    finish leaves its workers' modules running, with whatever they started: stop them (``reaping``)."""
    if (result.timed_out or result.error) and (found := reaping.stop_left_behind(run_id)):
        log.warning("stopped %d processes the run left running", found, extra={"run_id": run_id})


def finished_result(collector: EventCollector, rc: object, status: str, artifact_dir: Path) -> RunResult:
    """The result of a run that ran to an end: its events, exit code and ansible-runner's status word."""
    result = collector.result
    result.rc = rc if isinstance(rc, int) else 1
    result.timed_out = status == "timeout"
    if status == "failed" and not collector.complete and not result.failed_tasks:
        result.error = load_error(artifact_dir / "stdout")
    return result


def _collect_into(collector: EventCollector) -> Any:
    def handler(event: dict[str, Any]) -> bool:
        collector.add(event)
        return True  # keep ansible-runner's own job_events artifacts

    return handler


def _scrub_command_artifact(path: Path) -> None:
    """ansible-runner writes the run's whole environment into `command`: keep only the variable names."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(data, dict) and isinstance(data.get("env"), dict):
        data["env"] = sorted(data["env"])
        path.write_text(json.dumps(data), encoding="utf-8")


_ERROR_MARKS = ("[ERROR]", "ERROR!")
# argparse's last word on a command line it refuses: "<prog>: error: <message>"
_USAGE_ERROR = re.compile(r"^[\w.\-]+: error: \S")
_MAX_ERROR = 1000  # characters of Ansible's own error text kept for the status and the Event


def load_error(path: Path, tail: int = 5) -> str:
    """Why a run failed before any task, bounded for the status and the Event.

    Ansible's own error paragraph (``[ERROR]: ...`` or ``ERROR! ...`` and its ``Origin:`` line); else the
    command line parser's ``ansible-playbook: error: ...`` line (a bad ``--ansible-args``), which argparse
    prints after a usage text and ansible-core then follows with the whole help; else the last lines of the
    output that are not such a usage or help text.
    """
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "the Ansible run failed before it started"
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith(_ERROR_MARKS)), None)
    usage = next((line.strip() for line in lines if _USAGE_ERROR.match(line)), None)
    if start is not None:
        picked = []
        for line in lines[start:]:
            if not line.strip():
                break  # the paragraph ends; what follows is the code excerpt
            picked.append(line.strip())
    elif usage is not None:
        picked = [usage]
    else:
        picked = [line.strip() for line in _without_help(lines)[-tail:] if line.strip()]
    text = " | ".join(picked) or "the Ansible run failed"
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 3] + "..."


def _without_help(lines: list[str]) -> list[str]:
    """The lines of an output without argparse's usage and help texts, which say nothing about the failure:
    from a ``usage:`` line up to the next line that is neither indented, blank, nor a help section."""
    kept: list[str] = []
    in_help = False
    for line in lines:
        if line.startswith("usage: "):
            in_help = True
        elif in_help and line.strip() and not line.startswith(" ") and not _HELP_LINE.match(line):
            in_help = False
        if not in_help:
            kept.append(line)
    return kept


# Unindented lines of a help text: a description sentence, "options:", "Connection Options:"...
_HELP_LINE = re.compile(r"^(?:[A-Z][^:]*\.$|[\w ]+:$|[a-z][\w ]+ arguments:$)")
