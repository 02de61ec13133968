"""Playbooks loaded once, in the zygote, for every run: the warm executor's loaded-play cache.

Where it sits: the executor names the playbooks its runs will load (``executor``: the wrapper playbook of
each role on its roles path, and the playbooks watches.yaml names) in the zygote's warm-up request; the
zygote (``zygote.ZygoteServer``) calls ``preload`` with them after it prepared the roles (``parsed``: the
loads read the parsed files) and before it resets Ansible's state and sets its heap aside, and every run
it forks inherits the loaded trees. Each run loaded its playbook itself before: the plays, roles, blocks
and tasks built from the parsed YAML, ~11 ms of CPU for ``roles/foo``'s wrapper, ~60 ms for the heavy bench
role's 221 tasks. Now ``Playbook.load`` in a run answers from what the zygote loaded while nothing that load
depended on has changed (``compat.plays``: what is recorded, what is checked again in each run and what
keeps a playbook out); anything else loads as before.

Part of the lean path (on where it is: ansible-core 2.21; ``HYBRID_OPERATOR_LEAN=0`` turns both off, so the
differential tests of ``tests/integration/test_lean*.py`` compare runs with and without it), and
``HYBRID_OPERATOR_PRELOADED_PLAYS=0`` in the operator's environment turns this part off alone (read by the
zygote). ``tests/unit/ansible/warm/test_plays.py`` checks what keeps a playbook out and that an edit is
picked up.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import lean

DISABLE_ENV = "HYBRID_OPERATOR_PRELOADED_PLAYS"
MAX_PLAYBOOKS = 64  # a bounded start for the zygote, however many roles its roles path holds
PRELOADED: dict[str, compat.Preloaded] = {}  # by the path a run gives Playbook.load (one per process)


def preload(paths: Iterable[str], lean_on: bool) -> list[str]:
    """Load ``paths`` ahead for every run and hook ``Playbook.load`` to answer from them; one line per
    playbook left to the runs and why (``lean_on``: whether the lean path is installed: this is part of it)."""
    if not lean_on:
        return []
    if os.environ.get(DISABLE_ENV) == "0":
        return [f"{DISABLE_ENV}=0"]
    problems = compat.preload_problems()
    if problems:
        return [f"not on this ansible-core: {'; '.join(problems)}"]
    left: list[str] = []
    for path in list(dict.fromkeys(paths))[:MAX_PLAYBOOKS]:
        loaded = compat.preload(path)
        if isinstance(loaded, str):
            left.append(f"{path}: {loaded}")
        else:
            PRELOADED[path] = loaded
    if PRELOADED:
        compat.hook_preloaded(PRELOADED, lambda _path: lean.COUNTS.update((lean.LOADED_AHEAD,)))
    return left


def report_line(left: list[str]) -> None:
    """The zygote's log line about what it loaded ahead, and what it left to the runs and why."""
    text = f"zygote: {len(PRELOADED)} playbooks loaded ahead"
    if left:
        text += f"; left to the runs: {'; '.join(left)}"
    print(text, file=sys.stderr)
