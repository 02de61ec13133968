"""What a contender costs the machine, read from /proc: memory and CPU of its whole process tree.

An operator is more than its main process: ansible-runner, ansible-playbook, module servers and warm
forks run beside it. ``tree`` finds them as descendants of the operator's pid (by parent pid) plus every
process in its session (the bench starts each contender in a session of its own, so a process that was
re-parented is still found). ``Sampler`` polls the tree in the background for the peak memory and for
the command lines of the processes it sees (the peer's artifact directories are found that way).

CPU is summed as utime+stime+cutime+cstime over the live processes: a child that exits is reaped by its
parent, whose cutime/cstime then carry its time, so the sum neither loses nor double-counts finished
children (only processes re-parented to init and reaped there are lost).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")  # clock ticks a second, the unit of /proc/<pid>/stat times
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    session: int
    cpu_ticks: int  # utime + stime + cutime + cstime
    rss_bytes: int
    system_ticks: int = 0  # stime + cstime: the part of cpu_ticks spent in the kernel


@dataclass(frozen=True)
class Usage:
    """One look at a process tree."""

    processes: int
    rss_bytes: int
    cpu_seconds: float


def _read_stat(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:  # gone between listing and reading
        return None
    # The command name is in parentheses and may itself contain spaces or parentheses.
    rest = raw[raw.rfind(")") + 2 :].split()
    # rest[0] is field 3 (state): field n is rest[n - 3].
    return Proc(
        pid=pid,
        ppid=int(rest[1]),
        session=int(rest[3]),
        cpu_ticks=int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14]),
        rss_bytes=int(rest[21]) * _PAGE,
        system_ticks=int(rest[12]) + int(rest[14]),
    )


def _all_pids() -> Iterator[int]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            yield int(entry.name)


def tree(root: int) -> list[Proc]:
    """``root`` and its descendants, plus every process in ``root``'s session."""
    procs = [p for p in (_read_stat(pid) for pid in _all_pids()) if p is not None]
    children: dict[int, list[Proc]] = {}
    for proc in procs:
        children.setdefault(proc.ppid, []).append(proc)
    found = {p.pid: p for p in procs if p.pid == root or p.session == root}
    # Descendants too: ansible-runner starts ansible-playbook on a pty, in a session of its own.
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), []):
            if child.pid not in found:
                found[child.pid] = child
                stack.append(child.pid)
    return list(found.values())


def read(pid: int) -> Proc | None:
    """One process's figures (None when it is gone)."""
    return _read_stat(pid)


def usage(root: int) -> Usage:
    procs = tree(root)
    return Usage(
        processes=len(procs),
        rss_bytes=sum(p.rss_bytes for p in procs),
        cpu_seconds=sum(p.cpu_ticks for p in procs) / TICKS,
    )


def pss_bytes(root: int) -> int:
    """Proportional set size of the tree: shared pages (forks, libraries) counted once in total."""
    total = 0
    for proc in tree(root):
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{proc.pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
    return total


def cmdline(pid: int, proc: str | Path = "/proc") -> list[str]:
    try:
        with open(Path(proc) / str(pid) / "cmdline", "rb") as f:
            return [part.decode(errors="replace") for part in f.read().split(b"\0") if part]
    except OSError:
        return []


@dataclass
class Sampler:
    """Polls a process tree every ``interval`` seconds until stopped: peak memory, command lines seen."""

    root: int
    interval: float = 0.5
    peak_rss_bytes: int = 0
    commands: list[list[str]] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"sampler-{self.root}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            procs = tree(self.root)
            self.peak_rss_bytes = max(self.peak_rss_bytes, sum(p.rss_bytes for p in procs))
            for proc in procs:
                if proc.pid not in self._seen:
                    self._seen.add(proc.pid)
                    argv = cmdline(proc.pid)
                    if argv:
                        self.commands.append(argv)
            self._stop.wait(self.interval)
