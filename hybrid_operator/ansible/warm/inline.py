"""Tasks without a worker fork: the warm executor's fast path for every task of a local run.

Where it sits: the zygote (``zygote``) calls ``install`` once, after its warm-up, so every run it forks
inherits it. Ansible's strategies run each task in a ``WorkerProcess``, a ``fork()`` of the run's process
(25-40 ms of CPU each: the fork, copying the pages it touches, and loading again, in every worker, the
action plugins and templates the previous worker loaded and threw away). Forks buy parallelism across
hosts; an operator's run has one host, ``localhost`` on the ``local`` connection. So a task on the
``local`` connection now runs in the run's own process: the same ``TaskExecutor`` the worker would run,
its result put on the same results queue the strategy reads (``compat.run_task_inline``). What the
worker's fork isolated is kept where it matters: each module still runs in its own short-lived process
(``inworker``), and the task object the executor templates in place is a copy.

Tasks that talk back to the strategy while they run keep the worker: ``add_host`` and ``group_by``
(ansible-core 2.21 serves their inventory calls from the strategy's loop, which would be waiting on the
task) and ``pause`` (it prompts through the worker's queue). Other connections (``ssh``, ...) and
``delegate_to`` keep the worker too, so a playbook with several remote hosts keeps its forks' parallelism.

Every private name this needs is in ``compat`` (``hook_inline_tasks``); when its shape is not the one
expected, ``install`` says why and changes nothing. ``tests/integration/test_warm_executor.py`` compares
runs through this path with ansible-runner's; ``tests/unit/ansible/test_inline.py`` checks the policy and
the shape.
"""

from __future__ import annotations

import os
import sys

from hybrid_operator.ansible import compat

# Set to 0 in the operator's environment, every task forks Ansible's worker again (to compare, or to rule
# this path out). Read by the executor, which passes the zygote a flag.
DISABLE_ENV = "HYBRID_OPERATOR_INLINE_TASKS"
# Set to 0, each run starts ansible-core's RPC server when it starts (2.21), as Ansible does (read by the zygote).
LAZY_RPC_ENV = "HYBRID_OPERATOR_LAZY_RPC_HOST"
# Actions that call back into the strategy during the task: they need a worker process of their own.
NEEDS_WORKER = frozenset({"add_host", "group_by", "pause"})
_installed: list[bool] = []


def runs_here(action: str, connection: object, delegated: bool) -> bool:
    """Whether a task of this action, on this connection (``delegate_to`` set or not), may run in the run's
    own process."""
    return connection == "local" and not delegated and action.rsplit(".", 1)[-1] not in NEEDS_WORKER


def installed() -> bool:
    return bool(_installed)


def install() -> list[str]:
    """Make this process's strategies run eligible tasks in-process (see the module docstring); why it
    could not (then every task forks Ansible's worker, as usual). Once per process."""
    if _installed:
        return []
    problems = compat.inline_task_problems()
    if not problems:
        compat.hook_inline_tasks(runs_here)
        _installed.append(True)
        # Only a forked worker calls ansible-core's RPC server: start it in a run when one is forked. If that
        # cannot be installed, each run starts it, as usual: slower, not wrong.
        if os.environ.get(LAZY_RPC_ENV) != "0" and (deferral := compat.defer_rpc_host()):
            print(f"zygote: each run starts ansible-core's RPC server: {'; '.join(deferral)}", file=sys.stderr)
    return problems
