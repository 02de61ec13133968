"""In-process tasks (``warm.inline``): ``run_task_inline`` mirrors ``WorkerProcess._run`` of the minors in
``_INLINE_MINORS``; ``hook_inline_tasks`` makes the strategies use it.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

from hybrid_operator.ansible.compat.versions import UNTESTED_ENV, ansible_version

# The minors whose ``WorkerProcess._run`` ``run_task_inline`` mirrors line by line (2.19 and 2.20 build the
# result differently: they keep the worker fork). A newer minor is only tried under ``UNTESTED_ENV``.
_INLINE_MINORS = ((2, 21),)
_TASK_EXECUTOR_PARAMS = ("self", "host", "play_context", "loader", "shared_loader_obj", "final_q", "variable_manager")


def inline_task_problems() -> list[str]:
    """Why ``hook_inline_tasks`` cannot be installed in this ansible-core (empty: it can)."""
    major, minor, full = ansible_version()
    if not any(
        (major, minor) == known or ((major, minor) > known and os.environ.get(UNTESTED_ENV) == "1")
        for known in _INLINE_MINORS
    ):
        return [f"ansible-core {full}: tasks run in-process only on {_INLINE_MINORS} (its worker differs)"]
    try:
        from ansible._internal import _task
        from ansible.executor import task_queue_manager
        from ansible.executor.process import worker
        from ansible.executor.task_executor import TaskExecutor
        from ansible.plugins import strategy

        problems = []
        if getattr(strategy, "WorkerProcess", None) is not worker.WorkerProcess:
            problems.append("ansible.plugins.strategy.WorkerProcess: not ansible's WorkerProcess")
        if tuple(inspect.signature(TaskExecutor.__init__).parameters) != _TASK_EXECUTOR_PARAMS:
            problems.append("TaskExecutor.__init__: not the expected parameters")
        if not callable(getattr(getattr(_task, "TaskContext", None), "create", None)):
            problems.append("ansible._internal._task.TaskContext.create: not found")
        if not callable(getattr(task_queue_manager.FinalQueue, "send_task_result", None)):
            problems.append("FinalQueue.send_task_result: not found")
        if not callable(getattr(getattr(_task, "UnifiedTaskResult", None), "create_from_action_exception", None)):
            problems.append("UnifiedTaskResult.create_from_action_exception: not found")
        for name in ("_task", "_task_vars", "_host", "_play_context", "_loader", "_final_q"):
            if f"self.{name} = " not in inspect.getsource(worker.WorkerProcess.__init__):
                problems.append(f"WorkerProcess.{name}: not set by its constructor")
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def run_task_inline(worker: Any) -> None:
    """What ``WorkerProcess.run`` does in its forked child, done in this process: run the task through a
    ``TaskExecutor`` and put the result on the run's results queue, where the strategy reads it.

    Differences, each on purpose: the task is a copy (a worker's fork gets one for free; ``squash`` and
    the executor's templating change it in place, and a handler may run again); stdio is left alone and
    ``Display`` is not proxied (this process is the one that prints); the worker's hard exit on an
    unexpected error becomes a failed result for that task, as its queue-send failure path builds one."""
    from ansible._internal import _task
    from ansible.executor.task_executor import TaskExecutor

    task = worker._task.copy()
    host = worker._host
    try:
        with _task.TaskContext.create(task=task, task_vars=worker._task_vars, host_name=host.name):
            task.squash()
            executor = TaskExecutor(
                host,
                worker._play_context,
                worker._loader,
                worker._shared_loader_obj,
                worker._final_q,
                worker._variable_manager,
            )
            utr = executor.run()
            utr.finalize_registered_values()
    except Exception as exc:
        utr = _task.UnifiedTaskResult.create_from_action_exception(exc)
        utr.finalize_registered_values()
    task.ignore_errors = utr.ignore_errors  # as the worker does: callbacks read the post-loop values
    task.ignore_unreachable = utr.ignore_unreachable
    worker._final_q.send_task_result(host, task, utr)


def hook_inline_tasks(runs_here: Callable[[str, object, bool], bool]) -> None:
    """Make every strategy's worker run a task in this process when ``runs_here(action, connection,
    delegated)`` says so, and fork Ansible's ``WorkerProcess`` as usual otherwise. Check
    ``inline_task_problems`` first."""
    from ansible.executor.process.worker import WorkerProcess
    from ansible.plugins import strategy

    class InlineWorker(WorkerProcess):  # type: ignore[misc]  # Ansible is untyped here
        """A worker slot that, for an eligible task, runs it at ``start`` and is never alive after."""

        def start(self) -> None:
            connection = self._task_vars.get("ansible_connection", self._play_context.connection)
            if runs_here(str(self._task.action), connection, bool(self._task.delegate_to)):
                run_task_inline(self)  # never started as a process: ``is_alive`` is False, ``close`` is a no-op
            else:
                super().start()

    strategy.WorkerProcess = InlineWorker
