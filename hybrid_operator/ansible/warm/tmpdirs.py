"""A task's temp dir made and removed without a shell: the warm executor's fast path for actions that transfer
files (``kubernetes.core.k8s``, ``k8s_info``, ``template``, ``copy``...).

Where it sits: the zygote (``zygote``) calls ``install`` after its warm-up, so every run inherits it. Such an
action asks, before its module runs, for a temp dir on the target: on the ``local`` connection that was three
``/bin/sh`` processes per task (``echo ~``, ``mkdir``, ``rm -r``), a ``fork``/``exec`` of the run's large
process each, though its module then runs in a fork of the run (``inworker``) and most never use the dir. Now
the same dir is made and removed in Python (``compat.hook_tmpdirs``: exactly what the commands do, and where
it steps aside for Ansible's path, is written there).

``HYBRID_OPERATOR_LOCAL_TMPDIRS=0`` in the operator's environment turns this off (read by the zygote).
``tests/unit/ansible/warm/test_tmpdirs.py`` compares the dirs with the shell's and checks the shape.
"""

from __future__ import annotations

import os

from hybrid_operator.ansible import compat

DISABLE_ENV = "HYBRID_OPERATOR_LOCAL_TMPDIRS"
_installed: list[bool] = []


def install() -> list[str]:
    """Hook this process's Ansible (see the module docstring); why it could not. Once per process."""
    if _installed:
        return []
    if os.environ.get(DISABLE_ENV) == "0":
        return [f"{DISABLE_ENV}=0"]
    problems = compat.tmpdir_hook_problems()
    if not problems:
        compat.hook_tmpdirs()
        _installed.append(True)
    return problems
