"""The warm executor: the same runs as ``RunnerExecutor``, forked from a warm Ansible process.

An ``Executor`` (see ``running``) the reactor can use instead of ``RunnerExecutor``. A new
``ansible-playbook`` process costs ~1 s before its first task (interpreter, Ansible's imports and
configuration, YAML parsing of its plugin tables, pexpect); here a long-lived zygote process
(``zygote``, reached through ``zygoteclient``) has paid that once, and every run is a ``fork()`` of it.

Each run is made exactly as ``RunnerExecutor`` makes it: its own private data dir from the
``ArtifactStore``, written by ``inputdir``; ansible-runner's own ``RunnerConfig`` computes the command,
environment and working directory from the same options (``RunSetup.runner_options``, through
``compat.runner_command``); the child writes its output where ansible-runner's display callback expects
it; and the output is then read back through ansible-runner's own ``OutputEventFilter``
(``compat.replay_output``), so the job events, the ``stdout`` artifact and the
``RunResult`` have ansible-runner's shape. A run whose environment would change Ansible's configuration
(an ``ANSIBLE_*`` variable the zygote was not started with) is exec'ed as a fresh ``ansible-playbook``
instead, since Ansible reads its configuration only once per process.

From ``start`` on (the lifecycle calls it; a first run does too), in the background, the executor tests
the warm path (``selftest``): the zygote's warm-up is a
run of the self-test playbook on Ansible's normal path, and a forked run of it must give the same results.
Only then do runs use the zygote. When the test fails, the zygote cannot start, or ansible-runner's
internals are not the shape ``compat`` expects, the executor switches itself off for good with one log
line, and every run goes through ansible-runner (``running.run_with_runner``) instead: an optimisation
never fails a run. If a working zygote dies, the runs it had going fail with an error, ``ready()`` says
so, and the next ``run`` starts a new one.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path

from hybrid_operator import metrics
from hybrid_operator.ansible import compat, inputdir
from hybrid_operator.ansible.privatedirs import TempDir, write_private_file
from hybrid_operator.ansible.results import EventCollector, RunResult
from hybrid_operator.ansible.running import (
    ExecutorSettings,
    RunRequest,
    RunSetup,
    finished_result,
    run_with_runner,
    runner_ready,
)
from hybrid_operator.ansible.warm import lean, plays, project, protocol, selftest
from hybrid_operator.ansible.warm.client import DIED, SERVER, Pending, ZygoteClient, ZygoteError
from hybrid_operator.ansible.warm.replaying import RAW_OUTPUT, internal_events, replay, write_artifacts, write_command
from hybrid_operator.lifecycle import Loop

log = logging.getLogger(__name__)

START_TIMEOUT = 300.0  # the zygote's imports, warm-up and self-test, on a loaded machine
LOST_RUN_GRACE = 60.0  # past the run timeout, how long to wait for the zygote before giving up on a run
# Environment variables the zygote's Ansible has read once and for all: a run that needs other values
# cannot be a fork of it. The two per-run ones are read when they are used.
_PER_RUN_ENV = {"AWX_ISOLATED_DATA_DIR", "ANSIBLE_CACHE_PLUGIN_CONNECTION"}
_IMPORT_TIME_ENV = {"ORIGINAL_STDOUT_CALLBACK", "AD_HOC_COMMAND_ID"}

__all__ = ["SERVER", "START_TIMEOUT", "WarmExecutor", "ZygoteError"]


class WarmExecutor:
    """Runs each reconcile in a fork of a warm Ansible process; results as ``RunnerExecutor``'s.

    ``server``: how to start the zygote, after ``python -P`` (benchmarks start variants of it).
    """

    def __init__(self, settings: ExecutorSettings, server: tuple[str, ...] = SERVER) -> None:
        self.settings = settings
        self.server = server
        # Modules run in Ansible's workers (``inworker``), forks of the zygote that already imported their
        # libraries: no module server process (one fewer warm process in memory).
        self.setup = RunSetup(settings, module_server=False)
        self.store = self.setup.store
        # The zygote's own files (its log, its warm-up and self-test runs): private, and outside the artifact
        # store, which would otherwise count them as runs of its own and one day delete them.
        self._home = TempDir("hyop-warm-")
        self.home = self._home.path
        self.playbook = write_private_file(self.home / "warm-up.yml", selftest.PLAYBOOK)
        self._lock = threading.Lock()
        self._zygote: ZygoteClient | None = None
        self._closed = False
        self._cold_warned: set[str] = set()
        self.off = ""  # why the warm path switched itself off: every run then goes through ansible-runner
        metrics.WARM_EXECUTOR.set(1)
        self._decided = threading.Event()  # the first zygote passed its self-test, or the warm path is off
        self._starter = Loop("warm-start", lambda _stopping: self._first_start())

    # -- the lifecycle (``ready`` is the Executor's)

    def start(self) -> None:
        """Warm up and test the warm path in the background: the first reconcile need not pay for all of it."""
        self._starter.start()

    def stop(self, deadline: float) -> bool:
        self.close()
        return True

    def wait_until_ready(self, timeout: float = START_TIMEOUT) -> str:
        """Wait for the zygote's warm-up and self-test; the ansible-core version it runs (raises if off)."""
        zygote = self._zygote_for_run(timeout)
        if zygote is None:
            raise ZygoteError(self.off or "the warm Ansible process is not ready")
        return zygote.ansible_version

    @property
    def zygote_pid(self) -> int | None:
        zygote = self._zygote
        return zygote.pid if zygote is not None else None

    # -- Executor

    def ready(self) -> tuple[bool, str]:
        if self.off:
            return runner_ready(self.setup)
        zygote = self._zygote
        if not self._decided.is_set() or (zygote is not None and not zygote.error and not zygote.ready.is_set()):
            return False, "the warm Ansible process is warming up"
        if zygote is None:
            return False, "the warm Ansible process is not running"
        if zygote.error:
            return False, zygote.error
        if not zygote.alive:
            return False, DIED
        return True, "ok"

    def close(self) -> None:
        with self._lock:
            self._closed = True
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.stop()
        self.setup.close()
        self._home.close()

    def run(self, request: RunRequest) -> RunResult:
        zygote = self._zygote_for_run()
        if zygote is None:  # the warm path is off: Ansible's normal one
            return run_with_runner(self.setup, request)
        started = time.monotonic()
        run_dir = self.setup.new_run_dir(request)
        try:
            self.setup.write_input(run_dir, request)
        except OSError as exc:  # the project's inventory went away: this run fails, the warm path is fine
            result = EventCollector(request.run_id, request.on_event).result
            result.error = f"could not write the run's input dir: {exc}"
            self.store.finish(run_dir, request.max_artifacts)
            result.duration = time.monotonic() - started
            return result
        try:
            command = compat.runner_command(self.setup.runner_options(request, run_dir))
        except Exception as exc:  # ansible-runner's internals moved: nothing has run yet
            self._switch_off(f"could not prepare a run as ansible-runner would: {type(exc).__name__}: {exc}")
            return run_with_runner(self.setup, request, run_dir, input_written=True)
        collector = EventCollector(request.run_id, request.on_event)
        written: list[tuple[Path, str]] = []  # the job event artifacts, written once the result is out
        outcome = ("failed", 1)
        try:
            if request.on_event is None:
                rc, status, error = self._execute(request, zygote, command)
                replay(command.artifact_dir, request.run_id, collector, written)
            else:  # someone watches the run (reconcile FILE): read its output while it is written
                rc, status, error = self._execute_followed(request, zygote, command, collector, written)
            outcome = (status, rc)
            result = finished_result(collector, rc, status, command.artifact_dir)
            if error:
                result.error = error
            _take_report(result, command.artifact_dir / RAW_OUTPUT)
        except Exception as exc:  # an executor bug or a broken install must not kill the worker
            log.exception("the warm executor failed to run", extra={"run_id": request.run_id})
            result = collector.result
            result.error = f"could not run Ansible: {exc}"
        result.duration = time.monotonic() - started
        try:
            if request.on_result is not None:  # the status is written now, the artifacts after it
                request.on_result(result)
        finally:
            try:
                write_artifacts(command.artifact_dir, written, *outcome)
            except OSError as exc:  # a full disk costs the run's artifacts, not its result
                log.warning("could not write the run's artifacts: %s", exc, extra={"run_id": request.run_id})
            self.store.finish(run_dir, request.max_artifacts)
        return result

    # -- one run

    def _execute_followed(
        self,
        request: RunRequest,
        zygote: ZygoteClient,
        command: compat.RunnerCommand,
        collector: EventCollector,
        written: list[tuple[Path, str]],
    ) -> tuple[int, str, str]:
        """``_execute`` with the output replayed alongside, so each event reaches ``on_event`` as it happens."""
        done = threading.Event()
        follower = threading.Thread(
            target=replay,
            args=(command.artifact_dir, request.run_id, collector, written, done),
            name="follow",
            daemon=True,
        )
        follower.start()
        try:
            return self._execute(request, zygote, command)
        finally:
            done.set()
            follower.join()

    def _execute(
        self, request: RunRequest, zygote: ZygoteClient, command: compat.RunnerCommand
    ) -> tuple[int, str, str]:
        """Run it in a fork of the zygote: (exit code, ansible-runner's status word, executor error)."""
        (command.artifact_dir / "job_events").mkdir(mode=0o700, exist_ok=True)
        write_command(command)
        try:
            cold = self._needs_cold_start(request, command.env, zygote.env)
            pending = self._submit(zygote, _run_spec(command, cold))
        except ZygoteError as exc:
            log.error("no warm Ansible process to run in: %s", exc, extra={"run_id": request.run_id})
            return 1, "failed", f"could not run Ansible: {exc}"
        limit = command.timeout + LOST_RUN_GRACE if command.timeout else None
        if not pending.done.wait(limit):
            zygote.abandon(pending)
            return 1, "failed", "the warm Ansible process lost track of the run"
        if pending.error:
            return 1, "failed", f"could not run Ansible: {pending.error}"
        if pending.timed_out:
            return pending.rc, "timeout", ""
        return pending.rc, "successful" if pending.rc == 0 else "failed", ""

    def _submit(self, zygote: ZygoteClient, spec: protocol.RunSpec) -> Pending:
        """Hand a run to the zygote. One found dead before it took the run (nothing of the run has started) is
        replaced, once, and the run goes to the new one; a zygote that dies after is the run's failure."""
        try:
            return zygote.submit(spec)
        except ZygoteError as exc:
            replacement = self._zygote_for_run()
            if replacement is None or replacement is zygote:
                raise
            log.warning("the warm Ansible process died before this run reached it (%s): a new one runs it", exc)
            return replacement.submit(spec)

    def _needs_cold_start(self, request: RunRequest, env: dict[str, str], zygote_env: dict[str, str]) -> bool:
        changed = sorted(
            k for k in _frozen_env(env).keys() | _frozen_env(zygote_env).keys() if env.get(k) != zygote_env.get(k)
        )
        if changed and ",".join(changed) not in self._cold_warned:
            self._cold_warned.add(",".join(changed))
            log.warning(
                "this run changes Ansible settings the warm process has fixed (%s): it runs as a new ansible-playbook",
                ", ".join(changed),
                extra={"run_id": request.run_id},
            )
        return bool(changed)

    # -- the zygote

    def _switch_off(self, why: str) -> None:
        """The warm path steps aside for good: every run from now on goes through ansible-runner."""
        with self._lock:
            if self.off or self._closed:
                return
            self.off = why
            zygote, self._zygote = self._zygote, None
        metrics.WARM_EXECUTOR.set(0)  # HybridOperatorWarmExecutorOff: slower runs, and someone should know why
        log.warning("the warm executor switched itself off; runs go through ansible-runner: %s", why)
        self._decided.set()
        if zygote is not None:
            zygote.stop()

    def _first_start(self) -> None:
        """Start the first zygote and test it (in the background, from ``start``)."""
        try:
            problems = compat.runner_problems()
            if problems:
                raise ZygoteError("; ".join(problems))
            with self._lock:
                if self._closed:
                    return
                zygote = self._start_zygote()
            zygote.wait_ready(START_TIMEOUT)
            self._self_test(zygote)
        except Exception as exc:  # whatever it is, the runs must not pay for it
            self._switch_off(str(exc) or type(exc).__name__)
        finally:
            self._decided.set()

    def _zygote_for_run(self, timeout: float = START_TIMEOUT) -> ZygoteClient | None:
        """The zygote to fork this run from, started again if it died; None when the warm path is off."""
        self.start()  # an executor used without a lifecycle (tests, benches) starts at its first run
        self._decided.wait(timeout)
        with self._lock:
            if self._closed:
                raise ZygoteError("the executor is closed")
            zygote = self._zygote
            if self.off or zygote is None:
                return None
            if zygote.error or not zygote.alive:  # it died since: a new one (the same program, already tested)
                # Its process may have ended before its reader saw the end of file and said why: both are dead.
                why = zygote.error or DIED
                log.warning("the warm Ansible process failed (%s); starting a new one", why)
                zygote.stop()
                zygote = self._start_zygote()
        try:
            zygote.wait_ready(timeout)
        except ZygoteError as exc:
            self._switch_off(str(exc))
            return None
        return zygote

    def _start_zygote(self) -> ZygoteClient:
        """Prepare the warm-up run exactly as a reconcile is prepared, and start a zygote on its environment."""
        spec, self._warm_up_token = self._internal_run("warm-up")
        zygote = ZygoteClient(self.home, self.server, modules_in_worker=self.settings.module_server)
        zygote.start(spec, [str(path.absolute()) for path in self.settings.prepared_dirs], self._playbooks_ahead())
        self._zygote = zygote
        return zygote

    def _playbooks_ahead(self) -> list[str]:
        """The playbooks the zygote loads ahead (``plays``), at most ``plays.MAX_PLAYBOOKS``: those watches.yaml
        names, then the wrapper (written here, as a run of it would) of each role watches.yaml names by its
        path and of each role on the runs' roles path."""
        named = [str(path) for path in self.settings.prepared_playbooks if path.is_absolute()]
        roles = [str(path) for path in self.settings.prepared_dirs if project.is_role(path)]
        for root in project.roles_path_entries(self.setup.env.get("ANSIBLE_ROLES_PATH")):
            try:
                roles += [child.name for child in sorted(root.iterdir()) if project.is_role(child)]
            except OSError:  # unreadable: its roles are loaded by the runs, which say why if they must
                continue
        room = max(0, plays.MAX_PLAYBOOKS - len(named))  # a bounded warm-up request, whatever the project holds
        wrappers = [str(self.setup.wrapper_for(role)) for role in list(dict.fromkeys(roles))[:room]]
        return named[: plays.MAX_PLAYBOOKS] + wrappers

    def _internal_run(self, name: str) -> tuple[protocol.RunSpec, str]:
        """The run spec of the warm-up or the self-test (the same playbook, each with its own token)."""
        run_dir = self.home / name
        shutil.rmtree(run_dir, ignore_errors=True)
        token = selftest.new_token()
        request = RunRequest(
            run_id=name, group="", version="", kind="SelfTest", obj={}, playbook=self.playbook,
            watch_vars={selftest.TOKEN_VAR: token},
        )  # fmt: skip
        inputdir.write_private_dir(run_dir, request.extravars(), self.setup.python)
        command = compat.runner_command(self.setup.runner_options(request, run_dir))
        (command.artifact_dir / "job_events").mkdir(mode=0o700, exist_ok=True)
        return replace(_run_spec(command, cold=False), timeout=START_TIMEOUT), token

    def _self_test(self, zygote: ZygoteClient) -> None:
        """Run the warm-up playbook again in a fork and compare it with the zygote's own run of it."""
        spec, token = self._internal_run("self-test")
        pending = zygote.submit(spec)
        if not pending.done.wait(START_TIMEOUT + LOST_RUN_GRACE):
            zygote.abandon(pending)
        if pending.error or not pending.done.is_set():
            raise ZygoteError(f"the self-test run did not finish: {pending.error or 'no answer'}")
        reference = internal_events(self.home / "warm-up" / "artifacts" / "warm-up")
        forked = internal_events(self.home / "self-test" / "artifacts" / "self-test")
        verdict = selftest.compare(reference, self._warm_up_token, forked, token)
        if verdict.differences:
            raise ZygoteError(
                "self-test: a forked run differs from Ansible's own: " + "; ".join(verdict.differences[:3])
            )
        if self.settings.module_server and not zygote.modules_in_worker:
            log.warning("modules run in new interpreters, not in Ansible's workers: %s", zygote.why_not_in_worker)
        elif self.settings.module_server and not verdict.module_in_worker:
            log.warning("modules run in new interpreters: the self-test's collection module did not run in a worker")
        log.info("warm executor self-test passed", extra={"ansible": zygote.ansible_version})
        log.info("runs are forked from a settled heap: %s", zygote.heap)
        if zygote.why_not_lean:
            log.info("runs take Ansible's own steps, not the lean path: %s", zygote.why_not_lean)
        else:
            log.info("runs take the lean path where their tasks allow (%s=0 turns it off)", lean.DISABLE_ENV)
        if compat.ansible_version()[:2] >= compat.SUPPORTED[1]:
            why = f"{compat.UNTESTED_ENV}=1"
            log.warning("ansible-core %s is newer than the tested range; trying it (%s)", zygote.ansible_version, why)


def _take_report(result: RunResult, raw_output: Path) -> None:
    """Put what the run reported of its paths (``lean``) in its result, and count it."""
    result.path, result.loaded_ahead = lean.read_report(raw_output)
    if result.path:
        metrics.RUN_PATHS.labels(result.path).inc()
    if result.loaded_ahead:
        metrics.PLAYBOOKS_LOADED_AHEAD.inc()


def _run_spec(command: compat.RunnerCommand, cold: bool) -> protocol.RunSpec:
    output = str(command.artifact_dir / RAW_OUTPUT)
    return protocol.RunSpec(command.argv, command.env, command.cwd, output, command.timeout, cold)


def _frozen_env(env: dict[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in env.items() if (k.startswith("ANSIBLE_") or k in _IMPORT_TIME_ENV) and k not in _PER_RUN_ENV
    }
