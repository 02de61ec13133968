"""ansible-runner's side of a warm run (``warm.executor``): the command ``RunnerConfig`` computes, and the run's
output read back through its ``OutputEventFilter`` so events and artifacts have ansible-runner's shape.
"""

from __future__ import annotations

import codecs
import inspect
import io
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from hybrid_operator.ansible.compat.events import PartialReader


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
    (with its data from the display callback merged in, as ``Runner.event_callback`` does; from the run's
    stream of them, ``events``, or its ``-partial.json``).
    The raw output has "\\n" where ansible-runner's terminal gives "\\r\\n": that is done here.
    With ``follow``, the file is read while the run writes it, until ``follow`` is set and all is read."""
    from ansible_runner.utils import OutputEventFilter

    partials = PartialReader(events_dir)

    def merged(event: dict[str, Any]) -> None:
        if "uuid" not in event:
            return
        data = partials.take(str(event["uuid"]))
        if data is not None:
            event.update(data)
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
        partials.close()
