"""The warm executor: the same runs as ``RunnerExecutor``, forked from a warm Ansible process.

An ``Executor`` (see ``running``) the reactor can use instead of ``RunnerExecutor``. A new
``ansible-playbook`` process costs ~1 s before its first task (interpreter, Ansible's imports and
configuration, YAML parsing of its plugin tables, pexpect); here a long-lived zygote process
(``zygote``) has paid that once, and every run is a ``fork()`` of it.

Each run is made exactly as ``RunnerExecutor`` makes it: its own private data dir from the
``ArtifactStore``, written by ``inputdir``; ansible-runner's own ``RunnerConfig`` computes the command,
environment and working directory from the same options (``RunSetup.runner_options``); the child writes
its output where ansible-runner's display callback expects it; and the output is then read back through
ansible-runner's own ``OutputEventFilter``, so the job events, the ``stdout`` artifact and the
``RunResult`` have ansible-runner's shape. A run whose environment would change Ansible's configuration
(an ``ANSIBLE_*`` variable the zygote was not started with) is exec'ed as a fresh ``ansible-playbook``
instead, since Ansible reads its configuration only once per process.

If the zygote dies, the runs it had going fail with an error, ``ready()`` says so, and the next ``run``
starts a new one.
"""

from __future__ import annotations

import codecs
import contextlib
import datetime
import io
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ansible_runner.config.runner import RunnerConfig
from ansible_runner.utils import OutputEventFilter

from hybrid_operator.ansible import inputdir
from hybrid_operator.ansible.results import EventCollector, RunResult
from hybrid_operator.ansible.running import ExecutorSettings, RunRequest, RunSetup, finished_result
from hybrid_operator.ansible.zygote import KILL_GRACE, kill, terminate
from hybrid_operator.privatedirs import TempDir

log = logging.getLogger(__name__)

RAW_OUTPUT = "stdout.raw"  # the child's own output, before the event filter; removed once read
START_TIMEOUT = 300.0  # the zygote's imports and warm-up, on a loaded machine
RESTART_BACKOFF = 10.0  # after a failed start, runs fail fast for this long instead of starting again
LOST_RUN_GRACE = 60.0  # past the run timeout, how long to wait for the zygote before giving up on a run
# Environment variables the zygote's Ansible has read once and for all: a run that needs other values
# cannot be a fork of it. The two per-run ones are read when they are used.
_PER_RUN_ENV = {"AWX_ISOLATED_DATA_DIR", "ANSIBLE_CACHE_PLUGIN_CONNECTION"}
_IMPORT_TIME_ENV = {"ORIGINAL_STDOUT_CALLBACK", "AD_HOC_COMMAND_ID"}

WARM_UP_PLAYBOOK = """---
# Written by hybrid-operator: the warm executor's zygote runs this once, in itself, so that the plugins,
# YAML tables and templating every reconcile uses are loaded before it forks the first run.
- name: Warm up
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Template, filter and test
      ansible.builtin.set_fact:
        _warm_up: "{{ [1, 2] | map('string') | join(',') if 1 is number else '' }}"
    - name: Assert
      ansible.builtin.assert:
        that: _warm_up == '1,2'
        quiet: true
    - name: Loop
      ansible.builtin.debug:
        msg: "{{ item }}"
      loop: [1, 2]
    - name: Fail and rescue
      block:
        - name: Fail
          ansible.builtin.fail:
            msg: warm-up
      rescue:
        - name: Rescued
          ansible.builtin.debug:
            msg: rescued
"""


class ZygoteError(RuntimeError):
    """The zygote could not start, or died."""


@dataclass
class _Pending:
    """One run the zygote was asked for, as the reader thread learns about it."""

    run_id: int
    done: threading.Event = field(default_factory=threading.Event)
    pid: int | None = None
    rc: int = 1
    timed_out: bool = False
    cpu: float = 0.0  # CPU seconds of the run's whole process tree
    error: str = ""


class Zygote:
    """The executor's handle on one zygote process: start it, hand it runs, learn how they ended."""

    def __init__(self, home: Path, warm_up: str = "zygote", modules_in_worker: bool = False) -> None:
        self.home = home
        self.warm_up = warm_up
        self.modules_in_worker = modules_in_worker
        self.proc: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        self.ready = threading.Event()
        self.error = ""  # why it failed to start or died; empty while it is fine
        self.unsupported = False  # the failure is this ansible-core: starting again will not help
        self.pid = 0
        self.ansible_version = ""
        self._sock: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._ids = 0
        self._closing = False

    # -- life cycle

    def start(self, env: dict[str, str], warm_up_run: dict[str, Any]) -> None:
        """Start the process (returns at once; ``wait_ready`` waits for the warm-up)."""
        self.env = dict(env)
        cwd = self.home / "cwd"  # empty: an ansible.cfg in the operator's directory must not be read
        cwd.mkdir(parents=True, exist_ok=True, mode=0o700)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with (self.home / "zygote.log").open("ab") as log_file:
            command = [sys.executable, "-P", "-m", "hybrid_operator.ansible.zygote", "--fd", str(theirs.fileno())]
            self.proc = subprocess.Popen(
                [*command, "--warm-up", self.warm_up, *(["--modules-in-worker"] if self.modules_in_worker else [])],
                env=self.env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
                pass_fds=[theirs.fileno()],
                start_new_session=True,  # a Ctrl-C at the operator's terminal must not reach the runs
            )
        theirs.close()
        self._sock = ours
        self._send({"op": "warm-up", "run": warm_up_run})
        threading.Thread(target=self._read, name="warm-zygote-reader", daemon=True).start()

    def wait_ready(self, timeout: float) -> None:
        if not self.ready.wait(timeout):
            self._fail(f"the warm Ansible process did not warm up in {timeout:.0f}s")
            self.stop()
        if self.error:
            raise ZygoteError(self.error)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and not self.error

    def stop(self, timeout: float = 10.0) -> None:
        self._closing = True
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)  # end of file: the zygote kills its runs and exits
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._sock is not None:
            self._sock.close()

    # -- runs

    def submit(self, run: dict[str, Any]) -> _Pending:
        with self._lock:
            if self.error:
                raise ZygoteError(self.error)
            self._ids += 1
            pending = _Pending(self._ids)
            self._pending[pending.run_id] = pending
        try:
            self._send({"op": "run", "id": pending.run_id, "run": run})
        except OSError as exc:
            self._died(f"could not reach the warm Ansible process: {exc}")
        return pending

    def abandon(self, pending: _Pending) -> None:
        """Give up on a run the zygote never reported: kill its session and treat the zygote as broken."""
        if pending.pid:
            groups = terminate(pending.pid)
            time.sleep(KILL_GRACE)
            kill(groups)
        self._fail("the warm Ansible process stopped reporting on its runs")
        self.stop()

    def _send(self, message: dict[str, Any]) -> None:
        assert self._sock is not None
        data = json.dumps(message).encode() + b"\n"
        with self._send_lock:
            self._sock.sendall(data)

    # -- the reader thread

    def _read(self) -> None:
        assert self._sock is not None
        buffer = b""
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    self._on_message(json.loads(line))
        self._died("the executor closed it" if self._closing else "the warm Ansible process died")

    def _on_message(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "ready":
            self.pid = int(message["pid"])
            self.ansible_version = str(message.get("ansible_version", ""))
            log.info(
                "warm Ansible process ready",
                extra={"pid": self.pid, "ansible": self.ansible_version, "seconds": round(message["seconds"], 2)},
            )
            self.ready.set()
        elif op == "fatal":
            self.unsupported = bool(message.get("unsupported"))
            self._fail(str(message.get("error") or "the warm Ansible process failed to start"))
        elif op in ("started", "exited"):
            with self._lock:
                pending = self._pending.get(int(message["id"]))
                if pending is not None and op == "exited":
                    del self._pending[pending.run_id]
            if pending is None:
                return
            if op == "started":
                pending.pid = int(message["pid"])
            else:
                pending.rc = int(message["rc"])
                pending.timed_out = bool(message.get("timed_out"))
                pending.cpu = float(message.get("cpu") or 0.0)
                pending.done.set()

    def _fail(self, error: str) -> None:
        if not self.error:
            self.error = error
        self.ready.set()  # wakes anyone waiting for the warm-up: they read the error

    def _died(self, reason: str) -> None:
        """The zygote is gone: stop the runs it had going and fail them."""
        code = None
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.proc.wait(5)
        detail = f" (exit code {code})" if code is not None else ""
        tail = _tail(self.home / "zygote.log")
        self._fail(f"{reason}{detail}" + (f": {tail}" if tail and not self._closing else ""))
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        orphans = [terminate(run.pid) for run in pending if run.pid]  # they outlive the zygote otherwise
        if orphans:
            time.sleep(KILL_GRACE)
        for groups in orphans:
            kill(groups)
        for run in pending:
            run.error = self.error
            run.done.set()


class WarmExecutor:
    """Runs each reconcile in a fork of a warm Ansible process; results as ``RunnerExecutor``'s."""

    warm_up = "zygote"  # where the zygote runs its warm-up playbook: zygote | child | none (see zygote)

    def __init__(self, settings: ExecutorSettings) -> None:
        self.settings = settings
        # Modules run in Ansible's workers (``inworker``), forks of the zygote that already imported their
        # libraries: no module server process (one fewer warm process in memory).
        self.setup = RunSetup(settings, module_server=False)
        self.store = self.setup.store
        # The zygote's own files (its log, its warm-up run): private, and outside the artifact store, which
        # would otherwise count the warm-up run as one of its own and one day delete it.
        self._home = TempDir("hyop-warm-")
        self.home = self._home.path
        self._lock = threading.Lock()
        self._zygote: Zygote | None = None
        self._failed_at = 0.0
        self._closed = False
        self._cold_warned: set[str] = set()
        self.cpu_seconds = 0.0  # CPU used by all runs' process trees (not the zygote's own): for benchmarks
        try:
            self._start_zygote()  # warms up in the background: the first reconcile need not pay for it
        except Exception:  # the first run tries again, and fails with the reason if it still cannot
            log.exception("could not start the warm Ansible process")

    def wait_until_ready(self, timeout: float = START_TIMEOUT) -> str:
        """Wait for the zygote's warm-up (starting it again if it died); the ansible-core version it runs."""
        return self._zygote_for_run(timeout).ansible_version

    @property
    def zygote_pid(self) -> int | None:
        zygote = self._zygote
        return zygote.proc.pid if zygote is not None and zygote.proc is not None else None

    # -- Executor

    def ready(self) -> tuple[bool, str]:
        zygote = self._zygote
        if zygote is None:
            return False, "the warm Ansible process is not running"
        if zygote.error:
            return False, zygote.error
        if not zygote.ready.is_set():
            return False, "the warm Ansible process is warming up"
        if not zygote.alive:
            return False, "the warm Ansible process died"
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
        started = time.monotonic()
        run_dir = self.setup.new_run_dir(request)
        artifact_dir = run_dir / "artifacts" / request.run_id
        collector = EventCollector(request.run_id, request.on_event)
        try:
            inputdir.write_private_dir(run_dir, request.extravars(), self.setup.python)
            config = _runner_config(self.setup.runner_options(request, run_dir))
            if request.on_event is None:
                rc, status, error = self._execute(request, config)
                _replay(artifact_dir, request.run_id, collector)
            else:  # someone watches the run: read its output while it is written
                done = threading.Event()
                follower = threading.Thread(
                    target=_replay, args=(artifact_dir, request.run_id, collector, done), name="follow", daemon=True
                )
                follower.start()
                try:
                    rc, status, error = self._execute(request, config)
                finally:
                    done.set()
                    follower.join()
            _write_outcome(artifact_dir, status, rc)
            result = finished_result(collector, rc, status, artifact_dir)
            if error:
                result.error = error
        except Exception as exc:  # an executor bug or a broken install must not kill the worker
            log.exception("the warm executor failed to run", extra={"run_id": request.run_id})
            result = collector.result
            result.error = f"could not run Ansible: {exc}"
        finally:
            self.store.finish(run_dir, request.max_artifacts)
        result.duration = time.monotonic() - started
        return result

    # -- one run

    def _execute(self, request: RunRequest, config: RunnerConfig) -> tuple[int, str, str]:
        """Run it in a fork of the zygote: (exit code, ansible-runner's status word, executor error)."""
        artifact_dir = Path(config.artifact_dir)
        (artifact_dir / "job_events").mkdir(mode=0o700, exist_ok=True)
        _write_command(artifact_dir, config)
        try:
            zygote = self._zygote_for_run()
            cold = self._needs_cold_start(request, config.env, zygote.env)
            pending = zygote.submit(_run_spec(config, artifact_dir, cold))
        except ZygoteError as exc:
            log.error("no warm Ansible process to run in: %s", exc, extra={"run_id": request.run_id})
            return 1, "failed", f"could not run Ansible: {exc}"
        limit = config.job_timeout + LOST_RUN_GRACE if config.job_timeout else None
        if not pending.done.wait(limit):
            zygote.abandon(pending)
            return 1, "failed", "the warm Ansible process lost track of the run"
        with self._lock:
            self.cpu_seconds += pending.cpu
        if pending.error:
            return 1, "failed", f"could not run Ansible: {pending.error}"
        if pending.timed_out:
            return pending.rc, "timeout", ""
        return pending.rc, "successful" if pending.rc == 0 else "failed", ""

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

    def _zygote_for_run(self, timeout: float = START_TIMEOUT) -> Zygote:
        with self._lock:
            if self._closed:
                raise ZygoteError("the executor is closed")
            zygote = self._zygote
            if zygote is not None and zygote.error:  # it failed to start, or died since
                if zygote.unsupported:
                    raise ZygoteError(zygote.error)
                if time.monotonic() - self._failed_at < RESTART_BACKOFF:  # do not start one per run
                    raise ZygoteError(f"{zygote.error} (starting another one shortly)")
                log.warning("the warm Ansible process failed (%s); starting a new one", zygote.error)
                zygote.stop()
                zygote = None
            if zygote is None:
                zygote = self._start_zygote()
        try:
            zygote.wait_ready(timeout)
        except ZygoteError:
            self._failed_at = time.monotonic()  # a start failed: the next runs fail fast for a while
            raise
        return zygote

    def _start_zygote(self) -> Zygote:
        """Prepare the warm-up run exactly as a reconcile is prepared, and start a zygote on its environment."""
        warm_up_dir = self.home / "warm-up"
        shutil.rmtree(warm_up_dir, ignore_errors=True)
        playbook = self.home / "warm-up.yml"
        playbook.write_text(WARM_UP_PLAYBOOK, encoding="utf-8")
        request = RunRequest(run_id="warm-up", group="", version="", kind="WarmUp", obj={}, playbook=playbook)
        inputdir.write_private_dir(warm_up_dir, request.extravars(), self.setup.python)
        config = _runner_config(self.setup.runner_options(request, warm_up_dir))
        artifact_dir = Path(config.artifact_dir)
        (artifact_dir / "job_events").mkdir(mode=0o700, exist_ok=True)
        zygote = Zygote(self.home, self.warm_up, modules_in_worker=self.settings.module_server)
        zygote.start(dict(config.env), _run_spec(config, artifact_dir, cold=False))
        self._zygote = zygote
        return zygote


def _runner_config(options: dict[str, Any]) -> RunnerConfig:
    """What ansible-runner would run for these options: its command, environment, cwd and timeout."""
    config = RunnerConfig(**options)
    config.prepare()
    return config


def _run_spec(config: RunnerConfig, artifact_dir: Path, cold: bool) -> dict[str, Any]:
    return {
        "argv": list(config.command),
        "env": {str(k): str(v) for k, v in config.env.items()},
        "cwd": str(config.cwd),
        "output": str(artifact_dir / RAW_OUTPUT),
        "timeout": config.job_timeout or None,
        "cold": cold,
    }


def _frozen_env(env: dict[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in env.items() if (k.startswith("ANSIBLE_") or k in _IMPORT_TIME_ENV) and k not in _PER_RUN_ENV
    }


def _write_command(artifact_dir: Path, config: RunnerConfig) -> None:
    """ansible-runner's ``command`` artifact, with only the names of the environment variables (as
    ``RunnerExecutor`` leaves it after scrubbing): the values may hold secrets."""
    data = {"command": list(config.command), "cwd": config.cwd, "env": sorted(config.env)}
    _write_private(artifact_dir / "command", json.dumps(data))


def _write_outcome(artifact_dir: Path, status: str, rc: int) -> None:
    """The ``status``, ``rc`` and (empty: a terminal has one stream) ``stderr`` artifacts ansible-runner writes."""
    for name, text in (("status", status), ("rc", str(rc))):
        _write_private(artifact_dir / name, text)
    (artifact_dir / "stderr").touch()


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _replay(artifact_dir: Path, run_id: str, collector: EventCollector, follow: threading.Event | None = None) -> None:
    """Read the child's output the way ansible-runner reads its pty: into job events and ``stdout``.

    The child wrote into a file where ansible-runner has a terminal, which turns every "\\n" into "\\r\\n":
    that is done here, so event ``stdout`` and the ``stdout`` artifact come out byte for byte the same.
    With ``follow``, the file is read while the child writes it, until ``follow`` is set and all is read.
    """
    events_dir = artifact_dir / "job_events"

    def on_event(event: dict[str, Any]) -> None:  # ansible-runner's Runner.event_callback, minus plugins
        if "uuid" not in event:
            return
        event["runner_ident"] = run_id
        partial = events_dir / f"{event['uuid']}-partial.json"
        try:
            event.update(json.loads(partial.read_text(encoding="utf-8")))
            partial.unlink()
        except (OSError, ValueError):
            pass
        if "created" not in event:
            event["created"] = datetime.datetime.now(datetime.UTC).isoformat()
        collector.add(event)
        final = events_dir / f"{event['counter']}-{event['uuid']}.json"
        _write_private(final.with_name(final.name + ".tmp"), json.dumps(event))
        final.with_name(final.name + ".tmp").rename(final)

    fd = os.open(artifact_dir / "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    stdout = os.fdopen(fd, "w", encoding="utf-8")
    output = OutputEventFilter(stdout, on_event, suppress_ansible_output=True)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    raw = artifact_dir / RAW_OUTPUT
    try:
        with _opened(raw, follow) as source:
            while True:
                chunk = source.read(4096)  # pexpect hands over small reads too
                if not chunk:
                    if follow is None or follow.is_set():
                        break
                    follow.wait(0.05)  # the child is still writing
                    continue
                output.write(decoder.decode(chunk).replace("\n", "\r\n"))
        tail = decoder.decode(b"", final=True)
        if tail:
            output.write(tail.replace("\n", "\r\n"))
    except FileNotFoundError:
        pass
    finally:
        output.close()
        raw.unlink(missing_ok=True)


def _opened(raw: Path, follow: threading.Event | None) -> BinaryIO:
    """The child's output file; when following, waited for until the child has created it (or is done)."""
    while follow is not None and not raw.exists() and not follow.is_set():
        follow.wait(0.05)
    if follow is not None and follow.is_set() and not raw.exists():
        return io.BytesIO()
    return raw.open("rb")


def _tail(path: Path, size: int = 2000) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - size))
            lines = handle.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in lines[-5:] if line.strip())
