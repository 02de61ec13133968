"""Stopping a run's whole process tree, and what a run left outside it: both executors' reaper.

A run is an ``ansible-playbook`` in a session of its own, but each of Ansible's worker processes (one fork
per task) calls ``setsid`` and so makes a process group of its own, and a module runs under its worker:
killing the run's group alone, as ansible-runner does at a timeout, leaves the workers and their modules
running. So a run is stopped in two stages: ``terminate`` (SIGTERM to the run's ``ansible-playbook``, which
Ansible forwards to its workers, and the process groups of its whole tree, read from /proc, noted), then,
``KILL_GRACE`` seconds later, ``kill`` (SIGKILL to every one of those groups).

A process can also leave the tree before the run is stopped: a module whose ``ansible-playbook`` ansible-runner
killed at its timeout (it goes on under init, with its own children), or a command a task started in a new
session and did not wait for. Every process a run starts carries the run's id in its environment (``RUN_ENV``,
set by ``RunSetup.runner_options``), and both stages also signal those (``marked``), wherever they are in the
process tree. A process that changed its environment block (a new ``exec`` with a cleared environment) is not found:
what ``terminate`` reads from the tree still is.

Used by the zygote at a run's timeout and when the executor goes away (``zygote``), by the warm executor
for the runs of a zygote that died or stopped answering (``warm.client``), and after a run of ansible-runner's
that timed out or failed to finish (``running.run_with_runner``: ``stop_left_behind``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

KILL_GRACE = 2.0  # seconds between a run's SIGTERM and the SIGKILL of what is left of it
# The environment variable every process of a run carries, its value the run's id (``RunRequest.run_id``).
RUN_ENV = "HYBRID_OPERATOR_RUN"


def process_groups(leader: int) -> set[int]:
    """The process groups of a run's process tree, read from /proc: the run's own, and the one each of
    Ansible's worker processes makes for itself (a worker calls ``setsid``, so killing the run's group
    alone leaves the workers and their modules running; ansible-runner has that leak)."""
    children: dict[int, list[int]] = {}
    group_of: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # after "(comm)", which may hold spaces
        except (OSError, IndexError):
            continue
        pid, ppid, pgid = int(entry.name), int(fields[1]), int(fields[2])
        children.setdefault(ppid, []).append(pid)
        group_of[pid] = pgid
    groups, stack = {leader}, [leader]
    while stack:
        for child in children.get(stack.pop(), []):
            groups.add(group_of[child])
            stack.append(child)
    groups.discard(os.getpgrp())  # never our own (a run cannot be in it: it made its own session)
    return groups


def terminate(leader: int | None, mark: str = "") -> set[int]:
    """First stage of stopping a run: SIGTERM to its ``ansible-playbook`` (``leader``, None: not started),
    which Ansible forwards to its workers and they to their modules, and to the processes ``marked`` with its
    id. Returns the process groups to SIGKILL a moment later."""
    groups = process_groups(leader) if leader else set()
    if leader:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(leader, signal.SIGTERM)
    signal_marked(mark, signal.SIGTERM)
    return groups


def kill(groups: set[int], mark: str = "") -> None:
    """Second stage: SIGKILL whatever is left in the run's process groups, and of its ``marked`` processes."""
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    signal_marked(mark, signal.SIGKILL)


def carries(environ: bytes, run_id: str) -> bool:
    """Whether a process environment block (``/proc/<pid>/environ``: ``NAME=value`` entries, each ended by a
    NUL) sets ``RUN_ENV`` to exactly ``run_id``: one entry of the block, so a value that merely contains that
    text is not a mark. Never for an empty id, or one no environment can hold (a NUL)."""
    return _markable(run_id) and f"{RUN_ENV}={run_id}".encode() in environ.split(b"\0")


def _markable(run_id: str) -> bool:
    """Whether an environment can carry ``run_id`` as a mark (not empty, no NUL)."""
    return bool(run_id) and "\0" not in run_id


def marked(run_id: str) -> set[int]:
    """The processes (other than this one) whose environment ``carries`` ``run_id``, read from /proc. A
    zombie's environment is empty (nothing to stop); another user's process cannot be read (nothing found)."""
    found: set[int] = set()
    if not _markable(run_id):
        return found
    for proc in os.scandir("/proc"):
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{proc.name}/environ", "rb") as environ:
                block = environ.read()
        except OSError:
            continue
        if carries(block, run_id):
            found.add(int(proc.name))
    return found


def signal_marked(run_id: str, signum: int) -> int:
    """Send ``signum`` to every process ``marked`` with ``run_id``; how many there were."""
    pids = marked(run_id)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)
    return len(pids)


def stop_left_behind(run_id: str, grace: float = KILL_GRACE) -> int:
    """Stop what a run that has ended left running: SIGTERM to every process ``marked`` with its id, SIGKILL to
    those still there ``grace`` seconds later (sooner once none is). How many processes it found."""
    found = signal_marked(run_id, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while found and marked(run_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    kill(set(), run_id)
    return found
