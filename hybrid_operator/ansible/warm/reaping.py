"""Stopping a run's whole process tree: the warm executor's reaper.

A run is an ``ansible-playbook`` in a session of its own, but each of Ansible's worker processes (one fork
per task) calls ``setsid`` and so makes a process group of its own, and a module runs under its worker:
killing the run's group alone, as ansible-runner does at a timeout, leaves the workers and their modules
running. So a run is stopped in two stages: ``terminate`` (SIGTERM to the run's ``ansible-playbook``, which
Ansible forwards to its workers, and the process groups of its whole tree, read from /proc, noted), then,
``KILL_GRACE`` seconds later, ``kill`` (SIGKILL to every one of those groups).

Used by the zygote at a run's timeout and when the executor goes away (``zygote``), and by the executor
for the runs of a zygote that died or stopped answering (``zygoteclient``).
"""

from __future__ import annotations

import contextlib
import os
import signal

KILL_GRACE = 2.0  # seconds between a run's SIGTERM and the SIGKILL of what is left of it


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


def terminate(leader: int) -> set[int]:
    """First stage of stopping a run: SIGTERM to its ``ansible-playbook``, which Ansible forwards to its
    workers and they to their modules. Returns the process groups to SIGKILL a moment later."""
    groups = process_groups(leader)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(leader, signal.SIGTERM)
    return groups


def kill(groups: set[int]) -> None:
    """Second stage: SIGKILL whatever is left in the run's process groups."""
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
