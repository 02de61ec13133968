"""ansible-core 2.21's RPC server for workers, started in a run only when a worker is forked.

Where it sits: ``warm.inline.install`` calls ``defer_rpc_host`` once in the zygote, after the in-process task
path is installed; ``tasks.hook_inline_tasks``'s worker calls ``start_rpc_host`` before it forks a real
``WorkerProcess``. Each ``TaskQueueManager`` starts the server (``LocalManager.shared_instance()``) in its
constructor: a temporary directory, a Unix socket bound in it and two threads, ~3-5 ms of a run's start on
the test machine. Only a forked worker calls it (``add_host`` and ``group_by`` ask the strategy to change
the inventory through it), and with tasks in-process a run forks a worker only for those, ``pause`` and
tasks on other connections. So the constructor leaves it unstarted and the first worker fork starts it,
before the fork, as the constructor would have: the worker finds it in ``LocalManager._shared_instance``
exactly as when it was started early. A run without such a task never starts it.
``HYBRID_OPERATOR_LAZY_RPC_HOST=0`` in the operator's environment leaves it as Ansible has it (``warm.inline``).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from hybrid_operator.ansible.compat.state import _rpc_host, _rpc_host_in_shape, no_rpc_host

# Where the constructor starts it: if this line moved, the deferral is not installed (nothing changes).
_STARTED_BY = "_rpc_host.LocalManager.shared_instance()"
_deferred: list[bool] = []


def defer_rpc_host() -> list[str]:
    """Make every ``TaskQueueManager`` of this process (and of its forks) leave the RPC server unstarted
    until ``start_rpc_host``; why it could not (then each run starts it, as usual). Once per process;
    nothing to do before 2.21."""
    if _deferred:
        return []
    rpc_host = _rpc_host()
    if rpc_host is None:
        return []
    try:
        from ansible.executor.task_queue_manager import TaskQueueManager

        problems = [] if _rpc_host_in_shape() else ["ansible._internal._rpc_host.LocalManager: not the expected shape"]
        if _STARTED_BY not in inspect.getsource(TaskQueueManager.__init__):
            problems.append(f"TaskQueueManager.__init__: does not call {_STARTED_BY}")
    except Exception as exc:  # an import or source error is the same news: the shape changed
        problems = [f"{type(exc).__name__}: {exc}"]
    if problems:
        return problems
    construct = TaskQueueManager.__init__

    @functools.wraps(construct)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        with no_rpc_host():
            construct(self, *args, **kwargs)

    TaskQueueManager.__init__ = __init__
    _deferred.append(True)
    return []


def deferred() -> bool:
    return bool(_deferred)


def start_rpc_host() -> None:
    """Start this run's RPC server if ``defer_rpc_host`` left it unstarted (a no-op once it runs, and
    before 2.21). Called before a worker is forked: the worker calls the server its parent started."""
    rpc_host = _rpc_host()
    if _deferred and rpc_host is not None:
        rpc_host.LocalManager.shared_instance()
