"""The profiling switch of warm runs (``warm.profiling``): off by default, one file per process when on, and
a fork of a profiled process (a module of a profiled run) profiles itself instead of failing."""

from __future__ import annotations

import os
import pstats
from pathlib import Path

import pytest

from hybrid_operator.ansible.warm import profiling


def _work(n: int) -> int:
    return sum(i * i for i in range(n)) % 7


def test_off_unless_the_environment_names_a_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(profiling.PROFILE_ENV, raising=False)
    assert profiling.profiled("run", _work, 1000) == _work(1000)
    assert list(tmp_path.iterdir()) == []


def test_a_profile_per_process_that_summary_reads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(profiling.PROFILE_ENV, str(tmp_path / "profiles"))
    assert profiling.profiled("run", _work, 20000) == _work(20000)
    written = tmp_path / "profiles" / f"run-{os.getpid()}.prof"
    assert written.is_file()
    assert any(func[2] == "_work" for func in pstats.Stats(str(written)).stats)  # type: ignore[attr-defined]
    text = profiling.summary([written], limit=5)
    assert text.startswith("1 runs; total CPU per run under the profiler") and "_work" in text


def test_profiled_inside_profiled_does_not_fail(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What a module forked by a profiled run does: its own profile, not the inherited one."""
    monkeypatch.setenv(profiling.PROFILE_ENV, str(tmp_path))
    assert profiling.profiled("run", lambda n: profiling.profiled("module", _work, n), 100) == _work(100)
    assert (tmp_path / f"module-{os.getpid()}.prof").is_file()


def test_an_unwritable_directory_only_loses_the_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(profiling.PROFILE_ENV, str(blocker / "sub"))
    assert profiling.profiled("run", _work, 10) == _work(10)


def test_summary_of_nothing() -> None:
    assert profiling.summary([]) == "no profiles\n"
