"""A warm run's output turned into ansible-runner's artifacts: job events, ``stdout``, ``status``, ``rc``.

Where it sits: ``executor.WarmExecutor.run`` writes the ``command`` artifact before the run, ``replay``s the
child's raw output (``RAW_OUTPUT``) through ansible-runner's ``OutputEventFilter`` (``compat.replay_output``)
after it or while it is written, hands the result on, and then calls ``write_artifacts`` for the files
ansible-runner would have left. ``internal_events`` reads the zygote's own runs (warm-up, self-test).
"""

from __future__ import annotations

import datetime
import json
import os
import threading
from pathlib import Path
from typing import Any

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.results import EventCollector

RAW_OUTPUT = "stdout.raw"  # the child's own output, before the event filter; removed once read


def write_command(command: compat.RunnerCommand) -> None:
    """ansible-runner's ``command`` artifact, with only the names of the environment variables (as
    ``RunnerExecutor`` leaves it after scrubbing): the values may hold secrets."""
    data = {"command": command.argv, "cwd": command.cwd, "env": sorted(command.env)}
    _write_private(command.artifact_dir / "command", json.dumps(data))


def write_artifacts(artifact_dir: Path, events: list[tuple[Path, str]], status: str, rc: int) -> None:
    """The job event files (each written under a temporary name, then renamed, as ansible-runner does) and the
    ``status``, ``rc`` and (empty: a terminal has one stream) ``stderr`` artifacts ansible-runner writes.

    Called once the run's result has been handed on (``RunRequest.on_result``): creating ~50 small files
    took 2-60 ms on the test machine's disk, and the object's status need not wait for them."""
    for final, text in events:
        temporary = final.with_name(final.name + ".tmp")
        _write_private(temporary, text)
        temporary.rename(final)
    for name, text in (("status", status), ("rc", str(rc))):
        _write_private(artifact_dir / name, text)
    (artifact_dir / "stderr").touch()


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def replay(
    artifact_dir: Path,
    run_id: str,
    collector: EventCollector,
    written: list[tuple[Path, str]],
    follow: threading.Event | None = None,
) -> None:
    """Turn the child's raw output into job events and ``stdout``, as ansible-runner does with its pty
    (while the child writes it, with ``follow``, until that is set). Each event's file is added to
    ``written`` (path, JSON) for ``write_artifacts``."""
    events_dir = artifact_dir / "job_events"

    def on_event(event: dict[str, Any]) -> None:  # ansible-runner's Runner.event_callback, minus plugins
        event["runner_ident"] = run_id
        if "created" not in event:
            event["created"] = datetime.datetime.now(datetime.UTC).isoformat()
        collector.add(event)
        written.append((events_dir / f"{event['counter']}-{event['uuid']}.json", json.dumps(event)))

    try:
        compat.replay_output(artifact_dir / RAW_OUTPUT, artifact_dir / "stdout", events_dir, on_event, follow)
    finally:
        (artifact_dir / RAW_OUTPUT).unlink(missing_ok=True)


def internal_events(artifact_dir: Path) -> list[dict[str, Any]]:
    """The job events of an internal run (the warm-up, the self-test), read from its raw output."""
    events: list[dict[str, Any]] = []
    compat.replay_output(artifact_dir / RAW_OUTPUT, artifact_dir / "stdout", artifact_dir / "job_events", events.append)
    return events
