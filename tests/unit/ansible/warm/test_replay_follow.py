"""The warm executor's replay while the run writes (reconcile FILE's live task lines): it waits for the output,
reads what arrives, and stops once the run is done and everything is read; never hangs on a run without output."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from hybrid_operator.ansible import compat


def test_output_written_while_following_is_all_read(tmp_path: Path) -> None:
    raw, stdout = tmp_path / "stdout.raw", tmp_path / "stdout"
    done = threading.Event()

    def run() -> None:
        time.sleep(0.1)  # the output file appears only once the run started
        with raw.open("w") as out:
            for i in range(3):
                out.write(f"line {i}\n")
                out.flush()
                time.sleep(0.1)
        done.set()

    writer = threading.Thread(target=run)
    writer.start()
    compat.replay_output(raw, stdout, tmp_path, lambda _event: None, done)
    writer.join()
    assert stdout.read_bytes() == b"line 0\r\nline 1\r\nline 2\r\n"


def test_a_run_that_ends_without_output_does_not_hang(tmp_path: Path) -> None:
    done = threading.Event()
    threading.Timer(0.1, done.set).start()
    started = time.monotonic()
    compat.replay_output(tmp_path / "stdout.raw", tmp_path / "stdout", tmp_path, lambda _event: None, done)
    assert time.monotonic() - started < 5
    assert (tmp_path / "stdout").read_text() == ""
