"""The lean path: a run pays for its templates and its API calls, less for Ansible's machinery around them.

Where it sits: the zygote (``zygote``) calls ``install`` once, after its warm-up and before the module hooks
(``inworker``), so every run it forks inherits it; each run's child calls ``report`` when its playbook ends,
and the executor (``executor``) reads that report into the run's result, its log line and its metric.

What it changes, each piece exact by construction (what a role, the API server and ansible-runner's
consumers see is what Ansible's own path gives them) and checked by the differential tests
(``tests/integration/test_lean.py``, ``tests/unit/ansible/warm/test_lean.py``):

1. **API modules without a fork.** A module task of ``API_MODULES`` (``kubernetes.core``'s modules that only
   talk to the API server) that the in-worker path (``inworker``) would run in a fork of the run runs in the
   run's own process instead (``compat.run_here``: module-side ``module_utils`` while it runs, its output
   captured, the process put back after). A fork of a run costs more than the fork: the module writes to
   pages it shares with the run, and each such page is copied (measured: 14 ms of CPU in the child for
   1 ms of work touching a few thousand pages). In the run's process the module also finds the
   ``kubernetes.core`` client a previous module of the run built (its client pool) warm.
2. **Less of Ansible's generic machinery per task** (``compat.lean``): a task the in-process path runs
   (``inline``) still goes through Ansible's own ``TaskExecutor``, strategy, callbacks and result handling,
   but two steps whose outcome is the same from one task of a run to the next are taken once and reused:
   the task's play context (a copy of the play's, set from the task and the connection variables, each of
   ~45 attributes templated and type-checked for every task) and the validation and copy of the task's
   parent block (validated again, on a fresh copy of the parent chain, for every task under it). Reused
   only from the same inputs, when none of them holds a template, after Ansible's own path made them once
   without an error.
3. **Each task counted by its path**: ``lean`` when it ran in the run's own process, ``engine`` when it
   forked Ansible's worker.
4. **The playbook loaded once** (``plays``): the zygote loads the runs' playbooks ahead, and a run takes
   that tree while nothing its load depended on has changed; ``report`` says whether it did.

Per task, not per run: Ansible's strategy, its iterator and callbacks stay in charge of the whole run, so a
task outside these shapes (a module of another kind, ``become``, ``delegate_to``, another connection)
simply takes Ansible's own steps in the same run, and a run with a few such tasks (Kiali's operator has
``uri`` and ``include_role``) keeps the gain on all the others. ``report`` counts both, and the run's path
is ``lean`` (every task), ``mixed`` or ``engine`` (none).

Per ansible-core minor: 2.21, on. 2.19 and 2.20: off, because their tasks run in a fork of Ansible's worker
each (``inline`` is 2.21's), so the run's own process never runs a module and the module's fork is one of a
short-lived worker that would die with it anyway; 2.18: off, and its AnsiballZ wrapper calls its module
another way (``compat.in_process_problems``). Where it is off, ``install`` says why, the executor logs it
once, and every run takes Ansible's own steps. ``HYBRID_OPERATOR_LEAN=0`` in the operator's environment
turns it off.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from hybrid_operator.ansible import compat

DISABLE_ENV = "HYBRID_OPERATOR_LEAN"
REPORT_SUFFIX = ".lean"  # next to the run's raw output, read and removed by the executor
# Modules that only talk to the API server (their code, and what they import, read for what else they touch:
# no subprocess, no threads, no files but kubeconfigs and kubernetes.core's discovery cache, no signals).
API_MODULES = frozenset(
    {
        "ansible_collections.kubernetes.core.plugins.modules.k8s",
        "ansible_collections.kubernetes.core.plugins.modules.k8s_info",
    }
)
_installed: list[bool] = []
COUNTS: Counter[str] = Counter()  # this process's (a run's) tasks and modules by path
LOADED_AHEAD = "playbooks loaded ahead"  # the key of COUNTS ``plays`` counts a taken playbook under


def installed() -> bool:
    return bool(_installed)


def install() -> list[str]:
    """Switch the lean path on in this process (see the module docstring); why it could not (then every
    run takes Ansible's own steps, as before). Once per process."""
    if _installed:
        return []
    if os.environ.get(DISABLE_ENV) == "0":
        return [f"{DISABLE_ENV}=0"]
    problems = compat.lean_task_problems() or compat.in_process_problems()
    if not problems:
        compat.hook_lean_tasks(COUNTS)
        _installed.append(True)
    return problems


def in_process(fqn: str, wrapper: bytes, env: dict[str, str], cwd: str | None) -> tuple[int, bytes, bytes] | None:
    """Run an API module here (``inworker``'s ``ModulePolicy.in_process``); None: fork it as before."""
    if not _installed or fqn not in API_MODULES:
        return None
    call = compat.wrapper_call(wrapper)
    if call is None or call.module_fqn != fqn:
        return None
    COUNTS["modules in process"] += 1
    return compat.run_here(call, env, cwd)


def report(raw_output: str) -> None:
    """At the end of a run: what took which path, for the executor (nothing when the lean path is off)."""
    if not _installed:
        return
    path = Path(raw_output + REPORT_SUFFIX)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(dict(COUNTS), handle)


class Report(NamedTuple):
    """What a run reported: the path its tasks took (``lean``, ``mixed``, ``engine``; ``""``: no report)
    and whether its playbook was the one the zygote loaded ahead (``plays``)."""

    path: str
    loaded_ahead: bool = False


def read_report(raw_output: Path) -> Report:
    """The executor's side: what the run reported, or an empty ``Report`` when it made none (the lean path
    off, or a run that never started its playbook); the report removed."""
    path = raw_output.with_name(raw_output.name + REPORT_SUFFIX)
    try:
        counts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Report("")
    finally:
        path.unlink(missing_ok=True)
    lean, engine = int(counts.get("lean tasks", 0)), int(counts.get("engine tasks", 0))
    ahead = int(counts.get(LOADED_AHEAD, 0)) > 0
    if not engine:
        return Report("lean", ahead)  # (a run of no task at all too: nothing took Ansible's worker)
    return Report("mixed" if lean else "engine", ahead)
