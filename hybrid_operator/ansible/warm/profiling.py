"""A profile of each warm run, for people measuring where a reconcile's time goes. Off unless asked for.

Where it sits: the zygote's forked run (``child.become_run``) calls ``profiled(run_playbook, argv)``. When the
run's environment (the operator's, so set it where the operator starts) has ``PROFILE_ENV`` naming a
directory, the run's own process (Ansible's strategy, its in-process tasks, callbacks) runs under ``cProfile`` and its
statistics go to ``<dir>/run-<pid>.prof``, one file per run; each module forked in the worker
(``inworker._child``) likewise to ``<dir>/module-<pid>.prof``. Read them with ``python -m pstats`` or
``summary`` (``bench/profiles.py`` prints one for several runs). A profile costs the run
roughly twice its CPU: never on in production. A directory that cannot be written only loses the profile.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import os
import pstats
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

PROFILE_ENV = "HYBRID_OPERATOR_PROFILE_DIR"
_active: list[cProfile.Profile] = []  # the profile running in this process (inherited by its forks)


def profiled(what: str, call: Callable[[T], int], arg: T) -> int:
    """``call(arg)``, under cProfile when ``PROFILE_ENV`` names a directory; its statistics then go to
    ``<dir>/<what>-<pid>.prof`` (see the module docstring)."""
    target = os.environ.get(PROFILE_ENV, "")
    if not target:
        return call(arg)
    if _active:  # a fork of a profiled process (a module of a profiled run): one profiler per process
        _active.pop().disable()
    profile = cProfile.Profile()
    _active.append(profile)
    try:
        return profile.runcall(call, arg)
    finally:
        with contextlib.suppress(OSError):
            os.makedirs(target, mode=0o700, exist_ok=True)
            profile.dump_stats(os.path.join(target, f"{what}-{os.getpid()}.prof"))


def summary(files: Iterable[Path], limit: int = 40, sort: str = "cumulative") -> str:
    """The statistics of several runs' profiles together (totals over all of them), as text."""
    paths = [str(path) for path in files]
    if not paths:
        return "no profiles\n"
    out = io.StringIO()
    stats = pstats.Stats(*paths, stream=out)
    runs = len(paths)
    print(f"{runs} runs; total CPU per run under the profiler {stats.total_tt / runs * 1000:.0f} ms", file=out)  # type: ignore[attr-defined]
    stats.sort_stats(sort).print_stats(limit)
    return out.getvalue()
