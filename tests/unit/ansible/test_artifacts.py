"""Run dirs on disk: one per run, the newest N kept per object, and a byte budget across all objects."""

from __future__ import annotations

import itertools
import os
import stat
import subprocess
from pathlib import Path

import pytest

from hybrid_operator.ansible import artifacts
from hybrid_operator.ansible.artifacts import ArtifactStore, dir_size
from hybrid_operator.ansible.privatedirs import ensure_private_dir

A = ("cache.example.com", "v1alpha1", "Memcached", "shop", "a")
B = ("cache.example.com", "v1alpha1", "Memcached", "shop", "b")


class _Clock:
    """Stands in for the time module: every run dir name gets a later stamp (or the same one, if frozen)."""

    def __init__(self) -> None:
        self._ticks = itertools.count()
        self.frozen = False

    def strftime(self, _fmt: str) -> str:
        tick = 0 if self.frozen else next(self._ticks)
        return f"20250101T{tick:06d}"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(artifacts, "time", fake)
    return fake


def run(store: ArtifactStore, obj: tuple[str, ...], run_id: str, size: int, keep: int = 20) -> Path:
    run_dir = store.new_run_dir(obj, run_id)
    (run_dir / "env").mkdir()
    (run_dir / "env" / "extravars").write_bytes(b"x" * size)
    store.finish(run_dir, keep)
    return run_dir


def names(paths: list[Path]) -> list[str]:
    return [p.name.rsplit("-", 1)[1] for p in paths if p.exists()]


@pytest.fixture(autouse=True)
def sizes_not_blocks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget's arithmetic in plain bytes (a file's size, a dir's nothing), unless a test is about
    what the disk counts."""
    if "blocks" not in request.node.name:
        monkeypatch.setattr(artifacts, "disk_usage", lambda p: 0 if os.path.isdir(p) else os.lstat(p).st_size)


def test_dir_size_adds_up_every_file(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "one").write_bytes(b"1" * 10)
    (tmp_path / "a" / "b" / "two").write_bytes(b"2" * 32)
    assert dir_size(tmp_path) == 42


def test_dir_size_counts_blocks_as_du_does(tmp_path: Path) -> None:
    """ansible-runner writes many small files: their sizes said 10.5 MB where the disk held 35.3 MB."""
    run_dir = tmp_path / "run"
    (run_dir / "job_events").mkdir(parents=True)
    for i in range(50):
        (run_dir / "job_events" / f"{i}.json").write_bytes(b"{}")
    du = subprocess.run(["du", "-s", "--block-size=1", str(run_dir)], capture_output=True, text=True, check=True)
    assert dir_size(run_dir) == int(du.stdout.split()[0])
    assert dir_size(run_dir) >= 50 * 512  # a block each, not 2 bytes each


def test_new_run_dir_is_private_and_per_object(tmp_path: Path, clock: _Clock) -> None:
    store = ArtifactStore(tmp_path / "runner", max_bytes=1 << 20)
    run_dir = store.new_run_dir(("", "v1", "ConfigMap", "", "settings"), "abc123")
    assert (
        run_dir == tmp_path / "runner" / "_" / "v1" / "ConfigMap" / "_" / "settings" / "20250101T000000-00000000-abc123"
    )
    assert run_dir.is_dir()
    assert list(run_dir.iterdir()) == []
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700


def test_per_object_keep_count(tmp_path: Path, clock: _Clock) -> None:
    store = ArtifactStore(tmp_path, max_bytes=1 << 20)
    a_runs = [run(store, A, f"a{i}", 10, keep=2) for i in range(4)]
    b_runs = [run(store, B, f"b{i}", 10, keep=2) for i in range(2)]
    assert names(a_runs) == ["a2", "a3"]
    assert names(b_runs) == ["b0", "b1"]
    assert store.total_bytes == 40


def test_budget_deletes_the_oldest_runs_of_any_object(tmp_path: Path, clock: _Clock) -> None:
    store = ArtifactStore(tmp_path, max_bytes=250)
    runs = [run(store, A, "a1", 100), run(store, B, "b1", 100), run(store, A, "a2", 100)]
    assert names(runs) == ["b1", "a2"]
    runs.append(run(store, B, "b2", 100))
    assert names(runs) == ["a2", "b2"]
    assert store.total_bytes == 200


def test_live_runs_are_never_deleted(tmp_path: Path, clock: _Clock) -> None:
    store = ArtifactStore(tmp_path, max_bytes=150)
    live = store.new_run_dir(B, "live")
    (live / "big").write_bytes(b"x" * 1000)
    run(store, A, "a1", 100)
    run(store, A, "a2", 100)
    assert (live / "big").exists()


def _leftover(root: Path, obj: tuple[str, ...], name: str, size: int, mtime: float) -> Path:
    run_dir = root.joinpath(*obj, name)
    ensure_private_dir(run_dir / "env")  # as an earlier operator left it: mode 0700 all the way
    (run_dir / "env" / "extravars").write_bytes(b"x" * size)
    os.utime(run_dir, (mtime, mtime))
    return run_dir


def test_existing_run_dirs_are_indexed_at_start(tmp_path: Path, clock: _Clock) -> None:
    old_b = _leftover(tmp_path, B, "19990101T000000-old", 100, mtime=1_000_000)
    newer_a = _leftover(tmp_path, A, "19990101T000001-newer", 100, mtime=2_000_000)
    store = ArtifactStore(tmp_path, max_bytes=250)
    assert store.total_bytes == 200
    run(store, A, "a1", 100)
    assert not old_b.exists()  # the oldest by mtime goes first, whatever its object
    assert newer_a.exists()
    assert store.total_bytes == 200


def test_existing_run_dirs_count_against_keep(tmp_path: Path, clock: _Clock) -> None:
    leftovers = [_leftover(tmp_path, A, f"19990101T00000{i}-old{i}", 1, mtime=1_000_000 + i) for i in range(3)]
    store = ArtifactStore(tmp_path, max_bytes=1 << 20)
    new = run(store, A, "new", 1, keep=2)
    assert [p.exists() for p in leftovers] == [False, False, True]
    assert new.exists()


def test_budget_counts_what_the_keep_count_already_freed(tmp_path: Path, clock: _Clock) -> None:
    store = ArtifactStore(tmp_path, max_bytes=250)
    b1 = run(store, B, "b1", 100)
    run(store, A, "a1", 100, keep=1)
    run(store, A, "a2", 100, keep=1)  # keep=1 deletes a1: 200 bytes, under the budget
    assert b1.exists()


def test_keep_count_keeps_the_newest_run_within_one_second(tmp_path: Path, clock: _Clock) -> None:
    clock.frozen = True
    store = ArtifactStore(tmp_path, max_bytes=1 << 20)
    run(store, A, "ffff", 1, keep=1)
    newest = run(store, A, "0000", 1, keep=1)
    assert newest.exists()
