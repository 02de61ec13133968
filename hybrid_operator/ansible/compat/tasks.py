"""In-process tasks (``warm.inline``): ``run_task_inline`` mirrors ``WorkerProcess._run`` of the minors in
``_INLINE_MINORS``; ``hook_inline_tasks`` makes the strategies use it.

A task run in the strategy's own thread hands its messages (its result, and the callbacks its loop items and
retries send) to ``_DirectQueue``, which does at once what the strategy's results thread does with each of them
(``results_thread_main``), after the same pickle round trip the queue's pipe gives them. Through the queue each
message cost a pipe write, a wake-up of the results thread, the GIL handed to it and back, and the strategy's
1 ms polls until the result showed up: on a busy machine each hand-over waits for the scheduler.

A worker slot whose task runs here never makes the queue Ansible's worker answers prompts on
(``WorkerProcess.worker_queue``: a pipe and three named semaphores in ``/dev/shm``, made and unlinked for
every task): a task run here prints to this process's own ``Display``, which prompts in place, so nothing
is ever put on it. It is made at ``start`` for a slot that forks, before the fork, as Ansible makes it; and
at first use, should anything else reach for it (``_DeferredQueue``).
"""

from __future__ import annotations

import inspect
import os
import pickle
import threading
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
from typing import Any

from hybrid_operator.ansible.compat.rpchost import start_rpc_host
from hybrid_operator.ansible.compat.versions import UNTESTED_ENV, ansible_version

# The minors whose ``WorkerProcess._run`` ``run_task_inline`` mirrors line by line (2.19 and 2.20 build the
# result differently: they keep the worker fork). A newer minor is only tried under ``UNTESTED_ENV``.
_INLINE_MINORS = ((2, 21),)
_TASK_EXECUTOR_PARAMS = ("self", "host", "play_context", "loader", "shared_loader_obj", "final_q", "variable_manager")
_QUEUE_TASK_PARAMS = ("self", "host", "task", "task_vars", "play_context")
# What ``results_thread_main`` does with a task's result and with a callback a task sends (``_DirectQueue``).
_RESULTS_THREAD = (
    "strategy._tqm.send_callback(result.method_name, task_result)",
    "strategy._results.append(result)",
    "_convert_wire_task_result_to_host_task_result(result.wire_task_result)",
)
# How ``WorkerProcess.__init__`` makes its prompt queue (``_DeferredQueue`` stands in for it).
_WORKER_QUEUE_LINE = "self.worker_queue = WorkerQueue(ctx=multiprocessing_context)"
_current = threading.local()  # the strategy whose ``_queue_task`` is running in this thread
_constructing = threading.Lock()  # held while a worker slot is made with ``_DeferredQueue`` in the module


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
        problems += _worker_problems(worker)
        problems += _results_path_problems(strategy, _task)
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def _worker_problems(worker: Any) -> list[str]:
    """What ``run_task_inline`` and ``InlineWorker`` read of Ansible's worker slot, and how it makes its queue."""
    init = inspect.getsource(worker.WorkerProcess.__init__)
    problems = [
        f"WorkerProcess.{name}: not set by its constructor"
        for name in ("_task", "_task_vars", "_host", "_play_context", "_loader", "_final_q")
        if f"self.{name} = " not in init
    ]
    if _WORKER_QUEUE_LINE not in init or not isinstance(getattr(worker, "WorkerQueue", None), type):
        problems.append(f"WorkerProcess.__init__: no {_WORKER_QUEUE_LINE}")
    return problems


def _results_path_problems(strategy: Any, task_module: Any) -> list[str]:
    """What ``_DirectQueue`` relies on in the strategy: how its results thread handles a task's messages."""
    problems = []
    if tuple(inspect.signature(strategy.StrategyBase._queue_task).parameters) != _QUEUE_TASK_PARAMS:
        problems.append("StrategyBase._queue_task: not the expected parameters")
    source = inspect.getsource(strategy.results_thread_main)
    problems += [f"results_thread_main: no {line}" for line in _RESULTS_THREAD if line not in source]
    init = inspect.getsource(strategy.StrategyBase.__init__)
    for name in ("_results", "_results_lock"):  # (annotated or not)
        if f"self.{name} = " not in init and f"self.{name}: " not in init:
            problems.append(f"StrategyBase.{name}: not set")
    if not callable(getattr(getattr(task_module, "WireTaskResult", None), "create", None)):
        problems.append("ansible._internal._task.WireTaskResult.create: not found")
    return problems


class _DirectQueue:
    """The results queue of a task run in the strategy's own thread: each message handled at once, as the
    strategy's results thread handles it when it comes out of the queue (see the module docstring)."""

    def __init__(self, strategy: Any) -> None:
        self._strategy = strategy

    def _received(self, host: Any, task: Any, utr: Any) -> Any:
        from ansible._internal._task import WireTaskResult

        wire = pickle.loads(_pickled(WireTaskResult.create(host=host, task=task, utr=utr)))
        return self._strategy._convert_wire_task_result_to_host_task_result(wire)

    def send_callback(self, method_name: str, host: Any, task: Any, utr: Any) -> None:
        self._strategy._tqm.send_callback(method_name, self._received(host, task, utr))

    def send_task_result(self, host: Any, task: Any, utr: Any) -> None:
        result = self._received(host, task, utr)
        with self._strategy._results_lock:
            self._strategy._results.append(result)

    def __getattr__(self, name: str) -> Any:  # anything else (never sent by an in-process task): the queue's
        return getattr(self._strategy._final_q, name)


def warm_result_mappings() -> bool:
    """Fill ``UnifiedTaskResult``'s cached field mappings in this process (the zygote, after its warm-up, so
    every run inherits them): pure functions of the class, its dataclass fields and type hints, which the first
    task result of each run otherwise computed again (``typing.get_type_hints``: ~1.5 ms a run, the warm-up's
    own tasks having run in its workers). Called as Ansible calls them, keyword for keyword (the caches are
    ``functools.cache``, keyed on how they are called). Whether this ansible-core has them."""
    try:
        from ansible._internal._task import UnifiedTaskResult
    except ImportError:
        return False
    by_result_key = getattr(UnifiedTaskResult, "get_result_key_to_resolved_field_mapping", None)
    by_field_name = getattr(UnifiedTaskResult, "_get_field_name_to_result_key_mapping", None)
    if not (callable(by_result_key) and callable(by_field_name)):
        return False
    for flag in (False, True):
        by_result_key(source_is_module=flag)
        for round_trip in (False, True):
            by_field_name(for_callback=flag, for_round_trip=round_trip)
    return True


def _pickled(obj: Any) -> bytes:
    """``obj`` as the results queue's pipe carries it (``ForkingPickler``). The C pickler gives the same bytes
    for anything none of ``ForkingPickler``'s own reducers (multiprocessing's connections, sockets, ...) is
    for, in half the time (it looks each tagged value's type up in a plain table, not in a Python
    ``ChainMap``); what it cannot pickle is pickled by ``ForkingPickler``, as before."""
    try:
        return pickle.dumps(obj)
    except Exception:
        return bytes(ForkingPickler.dumps(obj))


class _DeferredQueue:
    """A worker slot's prompt queue, made only when something uses it (see the module docstring)."""

    def __init__(self, real: type, **kwargs: Any) -> None:
        self._real, self._kwargs, self._made = real, kwargs, None

    def made(self) -> Any:
        """The real queue (made now if it was not yet)."""
        if self._made is None:
            self._made = self._real(**self._kwargs)
        return self._made

    def __getattr__(self, name: str) -> Any:
        return getattr(self.made(), name)


def _send_result(final_q: Any, host: Any, task: Any, utr: Any) -> None:
    """``final_q.send_task_result``, with the worker's fallback when the result cannot be sent."""
    from ansible._internal import _task
    from ansible.errors import AnsibleError
    from ansible.inventory.host import Host
    from ansible.playbook.task import Task

    try:
        final_q.send_task_result(host, task, utr)
    except Exception as ex:
        try:
            raise AnsibleError("Task result omitted due to queue send failure.") from ex
        except Exception as ex_wrapper:
            stand_in = Task()
            stand_in._uuid = task._uuid
            failed = _task.UnifiedTaskResult.create_from_action_exception(ex_wrapper)
            failed.finalize_registered_values()
            final_q.send_task_result(Host(name=host.name), stand_in, failed)


def run_task_inline(worker: Any, share_parent: bool = False) -> Any:
    """What ``WorkerProcess.run`` does in its forked child, done in this process: run the task through a
    ``TaskExecutor`` and put the result on the run's results queue, where the strategy reads it. The task
    copy it ran. ``share_parent``: the copy keeps the task's own parent chain instead of a copy of it (the
    lean path's, for a parent it knows nothing will change: ``compat.lean``).

    Differences, each on purpose: the task is a copy (a worker's fork gets one for free; ``squash`` and
    the executor's templating change it and its parent blocks in place, and a handler may run again) of
    it and its parents, without the parents' lists of other tasks; stdio is left alone and
    ``Display`` is not proxied (this process is the one that prints); the worker's hard exit on an
    unexpected error becomes a failed result for that task, as its queue-send failure path builds one; the
    task's messages go to ``_DirectQueue`` (see the module docstring) when the strategy that queued it is
    known, else to the queue as before."""
    from ansible._internal import _task
    from ansible.executor.task_executor import TaskExecutor

    # The task and its parent chain, not its siblings: a plain ``copy()`` also copies every task of every
    # parent block (a role's ~100-task block, for each of its tasks), and nothing a task runs reads them.
    if share_parent:
        task = worker._task.copy(exclude_parent=True, exclude_tasks=True)
        task._parent = worker._task._parent
    else:
        task = worker._task.copy(exclude_tasks=True)
    host = worker._host
    strategy = getattr(_current, "strategy", None)
    final_q: Any = worker._final_q
    if strategy is not None and strategy._final_q is final_q:  # the strategy that queued this task
        final_q = _DirectQueue(strategy)
    try:
        with _task.TaskContext.create(task=task, task_vars=worker._task_vars, host_name=host.name):
            task.squash()
            executor = TaskExecutor(
                host,
                worker._play_context,
                worker._loader,
                worker._shared_loader_obj,
                final_q,
                worker._variable_manager,
            )
            utr = executor.run()
            utr.finalize_registered_values()
    except Exception as exc:
        utr = _task.UnifiedTaskResult.create_from_action_exception(exc)
        utr.finalize_registered_values()
    task.ignore_errors = utr.ignore_errors  # as the worker does: callbacks read the post-loop values
    task.ignore_unreachable = utr.ignore_unreachable
    _send_result(final_q, host, task, utr)
    return task


def hook_inline_tasks(runs_here: Callable[[str, object, bool], bool]) -> None:
    """Make every strategy's worker run a task in this process when ``runs_here(action, connection,
    delegated)`` says so, and fork Ansible's ``WorkerProcess`` as usual otherwise. Check
    ``inline_task_problems`` first."""
    from ansible.executor.process.worker import WorkerProcess
    from ansible.plugins import strategy

    queue_task = strategy.StrategyBase._queue_task

    def _queue_task(self: Any, host: Any, task: Any, task_vars: Any, play_context: Any) -> Any:
        _current.strategy = self  # for ``run_task_inline``: where this task's messages go
        try:
            return queue_task(self, host, task, task_vars, play_context)
        finally:
            _current.strategy = None

    from ansible.executor.process import worker

    real_queue = worker.WorkerQueue

    def deferred_queue(**kwargs: Any) -> _DeferredQueue:
        return _DeferredQueue(real_queue, **kwargs)

    class InlineWorker(WorkerProcess):  # type: ignore[misc]  # Ansible is untyped here
        """A worker slot that, for an eligible task, runs it at ``start`` and is never alive after; its
        prompt queue is made only when it forks (see the module docstring)."""

        def __init__(self, **kwargs: Any) -> None:
            with _constructing:
                worker.WorkerQueue = deferred_queue
                try:
                    super().__init__(**kwargs)
                finally:
                    worker.WorkerQueue = real_queue

        def start(self) -> None:
            connection = self._task_vars.get("ansible_connection", self._play_context.connection)
            if runs_here(str(self._task.action), connection, bool(self._task.delegate_to)):
                run_task_inline(self)  # never started as a process: ``is_alive`` is False, ``close`` is a no-op
            else:
                queue: Any = getattr(self, "worker_queue", None)
                if isinstance(queue, _DeferredQueue):
                    self.worker_queue = queue.made()  # before the fork: the child shares its pipe
                start_rpc_host()  # before the fork too: the worker calls back into this process's server
                super().start()

    strategy.WorkerProcess = InlineWorker
    strategy.StrategyBase._queue_task = _queue_task
