"""Where runs keep their files, and how much of it is kept.

Every run gets a private data dir of its own under
``<root>/<group>/<version>/<kind>/<namespace>/<name>/<run id>/`` (a shared one leaks env files between
runs and lets ansible-runner's rotation delete a live run). After each run the store keeps the newest
``maxRunnerArtifacts`` run dirs of that object **and** keeps the whole tree under a byte budget, deleting
the oldest runs of any object first: upstream never purges and fills disks (ansible-operator-plugins#47).
Bytes are counted as the disk counts them (allocated blocks, ``du``), so a volume's ``sizeLimit`` above
the budget holds.
Used by the executors in ``running``; the index of run dirs is in memory, so no run walks the whole tree.
The root and every dir under it are this user's alone (``privatedirs``): the operator refuses to start on
a root another user could have written, since what is found there is run.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import threading
import time
from collections import OrderedDict
from pathlib import Path

from hybrid_operator import metrics
from hybrid_operator.ansible.privatedirs import ensure_private_dir

ROOT_PURPOSE = "runner artifacts dir (--runner-artifacts-dir)"


def disk_usage(path: str) -> int:
    """What one file or directory takes on disk, as ``du`` counts it: its allocated blocks, not its size
    (ansible-runner's many small files take a block each: 10.5 MB of sizes were 35.3 MB of disk)."""
    return os.lstat(path).st_blocks * 512


def dir_size(path: Path) -> int:
    """What a run dir takes on disk: every file's and directory's blocks, the dir's own included."""
    total = 0
    for root, _dirs, files in os.walk(path):  # every directory comes once as a root
        for entry in (root, *(os.path.join(root, name) for name in files)):
            with contextlib.suppress(OSError):  # a file removed while we walk
                total += disk_usage(entry)
    return total


class ArtifactStore:
    def __init__(self, root: Path, max_bytes: int) -> None:
        # Every run's input is read from here: a dir another user could have written is refused.
        self.root = ensure_private_dir(root, ROOT_PURPOSE)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._runs: OrderedDict[Path, int] = OrderedDict()  # oldest first -> size
        self._live: set[Path] = set()
        self._bytes = 0
        self._seq = itertools.count()
        self._index_existing()
        metrics.ARTIFACT_BUDGET.set(max_bytes)
        metrics.ARTIFACT_BYTES.set(self._bytes)

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def new_run_dir(self, object_path: tuple[str, ...], run_id: str) -> Path:
        """A fresh, empty dir for one run; the name sorts by start time."""
        parent = ensure_private_dir(self.root.joinpath(*[p or "_" for p in object_path]), ROOT_PURPOSE)
        # A sequence number after the second: runs of one object sort by start within one second too.
        run_dir = parent / f"{time.strftime('%Y%m%dT%H%M%S')}-{next(self._seq):08d}-{run_id}"
        run_dir.mkdir(mode=0o700)
        with self._lock:
            self._live.add(run_dir)
        return run_dir

    def finish(self, run_dir: Path, keep: int) -> None:
        """Account a finished run, then enforce the per-object count and the global budget."""
        size = dir_size(run_dir)
        with self._lock:
            self._live.discard(run_dir)
            self._runs[run_dir] = size
            self._bytes += size
            doomed = self._over_count(run_dir.parent, keep)
            for path in doomed:
                self._bytes -= self._runs.pop(path, 0)
            over = self._over_budget()
            for path in over:
                self._bytes -= self._runs.pop(path, 0)
            doomed += over
            metrics.ARTIFACT_BYTES.set(self._bytes)
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)

    def _over_count(self, parent: Path, keep: int) -> list[Path]:
        siblings = sorted(p for p in self._runs if p.parent == parent)
        return siblings[: max(0, len(siblings) - keep)]

    def _over_budget(self) -> list[Path]:
        doomed, freed = [], 0
        for path, size in self._runs.items():  # oldest first
            if self._bytes - freed <= self.max_bytes:
                break
            doomed.append(path)
            freed += size
        return doomed

    def _index_existing(self) -> None:
        """Pick up run dirs left by an earlier process, so budgets hold across restarts."""
        found: list[tuple[float, Path]] = []
        for env_dir in self.root.glob("**/env"):
            run_dir = env_dir.parent
            try:
                found.append((run_dir.stat().st_mtime, run_dir))
            except OSError:
                continue
        for _mtime, run_dir in sorted(found):
            size = dir_size(run_dir)
            self._runs[run_dir] = size
            self._bytes += size
