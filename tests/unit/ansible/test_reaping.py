"""``ansible.reaping``'s run mark: which processes belong to a run, read from their environment, and stopping
what a run left behind. The block parser is tested against a reference on generated environments; the rest
on real processes, with marks written as another run (or a hostile value) could make them."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybrid_operator.ansible import reaping
from hybrid_operator.ansible.reaping import RUN_ENV, carries, marked, stop_left_behind

_names = st.text(st.characters(exclude_characters="\0=", codec="utf-8"), min_size=1, max_size=12)
_values = st.text(st.characters(exclude_characters="\0", codec="utf-8"), max_size=30)


def _block(env: dict[str, str]) -> bytes:
    return b"".join(f"{name}={value}".encode() + b"\0" for name, value in env.items())


@given(env=st.dictionaries(st.one_of(_names, st.just(RUN_ENV)), _values, max_size=6), run_id=_values)
def test_a_block_carries_a_mark_exactly_when_the_variable_holds_the_id(env: dict[str, str], run_id: str) -> None:
    assert carries(_block(env), run_id) == (bool(run_id) and env.get(RUN_ENV) == run_id)


@pytest.mark.parametrize(
    "env",
    [
        {"OTHER": f"{RUN_ENV}=abc"},  # the text, in another variable's value
        {RUN_ENV: "abcd"},  # another run whose id starts with this one
        {RUN_ENV: "ab"},
        {f"X{RUN_ENV}": "abc"},
        {RUN_ENV: "abc\nX=1"},
    ],
)
def test_what_only_looks_like_a_mark_is_none(env: dict[str, str]) -> None:
    assert not carries(_block(env), "abc")


def test_no_id_marks_anything() -> None:
    assert not carries(_block({RUN_ENV: ""}), "")
    assert not carries(b"", "")
    assert marked("") == set() and marked("a\0b") == set()


def _sleeper(env: dict[str, str], seconds: str, ignore_term: bool = False) -> subprocess.Popen[bytes]:
    """A ``sleep`` with ``env`` as its whole environment, returned once it has exec'd (before that, its
    /proc entry shows this process's command line and environment)."""
    argv = ["sh", "-c", f"trap '' TERM; exec sleep {seconds}"] if ignore_term else ["sleep", seconds]
    proc = subprocess.Popen(argv, env={"PATH": os.environ["PATH"], **env})
    deadline = time.monotonic() + 10
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    while cmdline.read_bytes().split(b"\0")[:2] != [b"sleep", seconds.encode()] and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def test_stop_left_behind_stops_the_runs_processes_and_no_other(sleepers: list[subprocess.Popen[bytes]]) -> None:
    run_id = f"run{os.getpid()}x{time.monotonic_ns()}"
    mine = _sleeper({RUN_ENV: run_id}, "31.01")
    stubborn = _sleeper({RUN_ENV: run_id}, "31.02", ignore_term=True)
    others = [
        _sleeper({RUN_ENV: run_id + "0"}, "31.03"),
        _sleeper({"OTHER": f"{RUN_ENV}={run_id}"}, "31.04"),
        _sleeper({}, "31.05"),
    ]
    sleepers.extend([mine, stubborn, *others])
    assert marked(run_id) == {mine.pid, stubborn.pid}
    assert stop_left_behind(run_id, grace=1.0) == 2
    assert mine.wait(5) == -signal.SIGTERM  # asked first
    assert stubborn.wait(5) == -signal.SIGKILL  # ignored it: killed after the grace
    assert all(proc.poll() is None for proc in others)
    assert marked(run_id) == set()


def test_nothing_left_behind_costs_no_wait() -> None:
    started = time.monotonic()
    assert stop_left_behind(f"none{time.monotonic_ns()}", grace=reaping.KILL_GRACE) == 0
    assert time.monotonic() - started < reaping.KILL_GRACE
