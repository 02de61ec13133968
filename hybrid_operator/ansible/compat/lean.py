"""The lean path's hooks into a run's task path (``warm.lean``), for the minors of ``tasks._INLINE_MINORS``.

Installed on top of the in-process task path (``hook_inline_tasks``), for the tasks it runs in the run's own
process. Each step below is one ``TaskExecutor`` (ansible-core 2.21, ``ansible/executor/task_executor.py``)
takes for every task, whose outcome is a function of inputs that are the same from one task of a run to the
next; the first task computes it on Ansible's own path, the later ones with the same inputs reuse it:

- **the task's play context** (``PlayContext.set_task_and_variable_override`` on the play's context, then its
  ``post_validate``: a copy of the play's context with ~45 attributes set from the task and from the
  connection variables, each then templated and type-checked). Reused when the play context is the same
  object, the task's attributes it reads (``TASK_ATTRIBUTE_OVERRIDES``, ``check_mode``, ``diff``) and the
  variables it reads (``C.MAGIC_VARIABLE_MAPPING``'s, ``inventory_hostname``) are equal, none of them nor of
  the result's attributes is a template, and the task is not delegated. Each task gets its own copy, as it
  got its own object before; a context whose validation failed is never reused.
- **the parent block's post-validation and copy** (``Task.post_validate`` validates the task's immediate
  parent again for every task, on a copy of the parent chain each task gets). Once a parent has been
  validated without error on Ansible's path in this run and none of the values its validation reads holds
  a template (so validating it again gives the same values, warnings and errors: none), later tasks under it
  share the parent unvalidated and uncopied, as loop items already share theirs.

- **plugin name resolution** (``PluginLoader.find_plugin_with_context``: a plugin's name, its collections
  list and its loader's search path to its file, through collection routing and several ``stat`` calls; the
  strategy resolves each task's action, the executor its action and connection plugins again, ~130 times in
  a 14-task run). A resolution that succeeded without a deprecation, a redirect still pending, an error or
  a message (a routing redirect says ``redirecting ...`` at ``-vv`` each time it is resolved) is remembered
  for the same loader, name, arguments, search directories and collection paths, and a copy of its outcome
  returned the next time. This assumes what Ansible itself assumes within a process (its
  ``PLUGIN_PATH_CACHE`` and its cache of loaded plugin modules are never invalidated either): the plugin
  files of a run do not change while it runs. Memos are the run's own (keyed by the process).

``hook_lean_tasks`` also counts each task by its path: ``lean tasks`` ran in the run's own process,
``engine tasks`` forked Ansible's worker.
"""

from __future__ import annotations

import copy
import os
import threading
from collections import Counter
from typing import Any

from hybrid_operator.ansible.compat import tasks

_NOT_PLAIN = object()  # a value a memo may not be keyed on (a template, something unhashable)
_ABSENT = object()  # a variable the task does not have
_state = threading.local()  # .base: the play context of the task the lean path is running in this thread
_play_contexts: dict[tuple[Any, ...], Any] = {}  # key -> the validated play context (this run's process)
_settled: set[tuple[type, str]] = set()  # parents whose validation is a no-op from now on (type, uuid)
_resolutions: dict[tuple[Any, ...], Any] = {}  # key -> a plugin resolution's outcome (this run's process)
_said = [0]  # messages the Display was asked to show or log (this process), so far
_CONTEXT_LISTS = (
    "redirect_list",
    "raw_error_list",
    "error_list",
    "import_error_list",
    "load_attempts",
    "deprecation_warnings",
)
_LEAN_MINORS = ((2, 21),)


def lean_task_problems() -> list[str]:
    """Why ``hook_lean_tasks`` cannot be installed in this process (empty: it can): it needs the in-process
    task path installed (``hook_inline_tasks``, whose own checks passed) and the steps above in the shape
    written there (``shape_problems``)."""
    from ansible.executor.process.worker import WorkerProcess
    from ansible.plugins import strategy

    worker = getattr(strategy, "WorkerProcess", None)
    if worker is WorkerProcess or not (isinstance(worker, type) and issubclass(worker, WorkerProcess)):
        return ["tasks fork Ansible's worker (the in-process task path is not installed)"]
    return shape_problems()


def shape_problems() -> list[str]:
    """What of the steps of the module docstring is not where this module expects it (empty: all is)."""
    import inspect

    from ansible.executor.task_executor import TaskExecutor
    from ansible.playbook.play_context import PlayContext
    from ansible.playbook.task import Task

    from hybrid_operator.ansible.compat.versions import ansible_version

    if ansible_version()[:2] not in _LEAN_MINORS:
        return [f"ansible-core {ansible_version()[2]}: the lean task steps are written for {_LEAN_MINORS}"]
    problems = []
    override = tuple(inspect.signature(PlayContext.set_task_and_variable_override).parameters)
    if override != ("self", "task", "variables", "templar"):
        problems.append("PlayContext.set_task_and_variable_override: not the expected parameters")
    source = inspect.getsource(TaskExecutor._execute_internal)
    for line in (
        "self._play_context = self._play_context.set_task_and_variable_override(task=self._task, "
        "variables=task_ctx.task_vars, templar=task_ctx.task_templar)",
        "self._play_context.post_validate(templar=task_ctx.task_templar)",
    ):
        if line not in source:
            problems.append(f"TaskExecutor._execute_internal: no {line.split('(')[0]}")
    if "self._parent.post_validate(templar)" not in inspect.getsource(Task.post_validate):
        problems.append("Task.post_validate: does not validate its parent")
    return problems + _resolution_problems()


def _resolution_problems() -> list[str]:
    import inspect

    from ansible.plugins.loader import PluginLoadContext, PluginLoader, action_loader
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    problems = []
    parameters = tuple(inspect.signature(PluginLoader.find_plugin_with_context).parameters)
    if parameters != ("self", "name", "mod_type", "ignore_deprecated", "check_aliases", "collection_list"):
        problems.append("PluginLoader.find_plugin_with_context: not the expected parameters")
    context = PluginLoadContext("module", "ansible.modules")
    wanted = (*_CONTEXT_LISTS, "resolved", "deprecated", "pending_redirect")
    missing = [name for name in wanted if not hasattr(context, name)]
    if not isinstance(getattr(action_loader, "_extra_dirs", None), list):
        missing.append("PluginLoader._extra_dirs")
    if not isinstance(getattr(_AnsibleCollectionFinder, "_n_collection_paths", None), property):
        missing.append("_AnsibleCollectionFinder._n_collection_paths")
    if missing:
        problems.append(f"plugin resolution: not the expected attributes ({', '.join(missing)})")
    return problems


def hook_lean_tasks(counts: Counter[str]) -> None:
    """Install the steps of the module docstring for the tasks the in-process path runs, and count every
    task by its path into ``counts``. Check ``lean_task_problems`` first; install after ``hook_inline_tasks``."""
    _hook_task_path(counts)
    _hook_play_contexts()
    _hook_parents()
    _hook_plugin_resolution()


def _hook_task_path(counts: Counter[str]) -> None:
    """Count tasks by path; in the lean one, know the run's play context and share settled parents."""
    from ansible.executor.process.worker import WorkerProcess

    run_inline = tasks.run_task_inline
    start = WorkerProcess.start

    def run_task_inline(worker: Any, share_parent: bool = False) -> Any:
        counts["lean tasks"] += 1
        parent = worker._task._parent
        share = share_parent or (parent is not None and (type(parent), parent._uuid) in _settled)
        _state.base = worker._play_context
        try:
            ran = run_inline(worker, share_parent=share)
        finally:
            _state.base = None
        copied = ran._parent if ran is not None else None
        if parent is not None and not share and copied is not None and copied._finalized and _plain_object(copied):
            _settled.add((type(parent), parent._uuid))
        return ran

    def start_worker(self: Any) -> None:
        counts["engine tasks"] += 1
        start(self)

    tasks.run_task_inline = run_task_inline
    WorkerProcess.start = start_worker


def _hook_play_contexts() -> None:
    from ansible import constants
    from ansible.playbook.play_context import TASK_ATTRIBUTE_OVERRIDES, PlayContext

    override = PlayContext.set_task_and_variable_override
    validate_context = PlayContext.post_validate
    task_attributes = (*TASK_ATTRIBUTE_OVERRIDES, "check_mode", "diff")
    magic = [name for names in constants.MAGIC_VARIABLE_MAPPING.values() for name in names]
    variable_names = (*dict.fromkeys(magic), "inventory_hostname")

    def set_task_and_variable_override(self: Any, task: Any, variables: Any, templar: Any) -> Any:
        key = _context_key(self, task, variables, templar, task_attributes, variable_names)
        if key is None:
            return override(self, task, variables, templar)
        known = _play_contexts.get(key)
        if known is None:
            made = override(self, task, variables, templar)
            made._hyop_key = key  # remembered by ``post_validate`` once it has validated it
            return made
        made = known.copy()
        made._hyop_validated = True
        return made

    def post_validate(self: Any, templar: Any) -> None:
        if self.__dict__.pop("_hyop_validated", False):
            return  # a copy of a context validated from the same values
        validate_context(self, templar)
        key = self.__dict__.pop("_hyop_key", None)
        if key is not None and not any(_template(templar, getattr(self, name)) for name in self.fattributes):
            _play_contexts[key] = self.copy()

    PlayContext.set_task_and_variable_override = set_task_and_variable_override
    PlayContext.post_validate = post_validate


def _hook_parents() -> None:
    from ansible.playbook.base import Base
    from ansible.playbook.task import Task

    def post_validate(self: Any, templar: Any) -> None:
        parent = self._parent
        if parent is not None and not (_active() and (type(parent), parent._uuid) in _settled):
            parent.post_validate(templar)
        Base.post_validate(self, templar)

    Task.post_validate = post_validate


def _hook_plugin_resolution() -> None:
    from ansible.plugins.loader import PluginLoader
    from ansible.utils.display import Display

    find = PluginLoader.find_plugin_with_context
    _count_messages(Display)

    def find_plugin_with_context(
        self: Any,
        name: str,
        mod_type: str = "",
        ignore_deprecated: bool = False,
        check_aliases: bool = False,
        collection_list: Any = None,
    ) -> Any:
        key = _resolution_key(self, name, mod_type, ignore_deprecated, check_aliases, collection_list)
        if key is not None and (known := _resolutions.get(key)) is not None:
            return _context_copy(known)
        before = _said[0]
        found = find(self, name, mod_type, ignore_deprecated, check_aliases, collection_list)
        if key is not None and _said[0] == before and _reusable(found):  # it said nothing: nor will it again
            _resolutions[key] = _context_copy(found)
        return found

    PluginLoader.find_plugin_with_context = find_plugin_with_context


def _count_messages(display_class: Any) -> None:
    """Count what ``Display`` is asked to show (``display``) or show at a verbosity (``verbose``): a
    resolution that said something (``redirecting (type: action) ...`` at ``-vv``, for a plugin a
    collection's routing redirects) says it each time Ansible resolves it, so it is not remembered."""
    for name in ("display", "verbose"):
        original = getattr(display_class, name)

        def counted(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            _said[0] += 1
            return _original(self, *args, **kwargs)

        setattr(display_class, name, counted)


def _resolution_key(
    loader: Any, name: Any, mod_type: Any, ignore_deprecated: Any, check_aliases: Any, collection_list: Any
) -> tuple[Any, ...] | None:
    """What a plugin resolution is a function of (the plugin files aside), or None: resolve it again."""
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if collection_list is not None and not isinstance(collection_list, list | tuple):
        return None
    if not all(isinstance(part, str) for part in (name, mod_type, *(collection_list or ()))):
        return None
    finder = AnsibleCollectionConfig.collection_finder
    return (
        os.getpid(),
        id(loader),
        loader.package,
        loader.class_name,
        tuple(loader._extra_dirs),
        tuple(finder._n_collection_paths) if finder is not None else (),  # the playbook's and the configured
        AnsibleCollectionConfig.default_collection,
        name,
        mod_type,
        bool(ignore_deprecated),
        bool(check_aliases),
        None if collection_list is None else tuple(collection_list),
    )


def _reusable(context: Any) -> bool:
    """A resolution whose outcome may be handed out again: resolved, nothing to warn of, nothing pending."""
    return bool(
        context.resolved
        and not context.deprecated
        and not context.pending_redirect
        and not context.raw_error_list
        and not context.error_list
        and not context.import_error_list
    )


def _context_copy(context: Any) -> Any:
    """A copy of a ``PluginLoadContext`` whose lists are its own (callers may extend them)."""
    made = copy.copy(context)
    for name in _CONTEXT_LISTS:
        setattr(made, name, list(getattr(context, name)))
    return made


def _active() -> bool:
    return getattr(_state, "base", None) is not None


def _context_key(
    base: Any,
    task: Any,
    variables: Any,
    templar: Any,
    task_attributes: tuple[str, ...],
    variable_names: tuple[str, ...],
) -> tuple[Any, ...] | None:
    """What a task's play context is made from, or None when it must be made (and validated) again."""
    current: Any = getattr(_state, "base", None)
    if current is None or base is not current or task.delegate_to is not None:
        return None
    parts: list[Any] = [id(current), current._uuid]
    parts += [_plain(templar, getattr(task, name, None)) for name in task_attributes]
    parts += [_plain(templar, variables[name]) if name in variables else _ABSENT for name in variable_names]
    if any(part is _NOT_PLAIN for part in parts):
        return None
    return tuple(parts)


def _plain(templar: Any, value: Any) -> Any:
    """``value`` when it can key a memo (hashable, no template in it), else ``_NOT_PLAIN``."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return _NOT_PLAIN if _template(templar, value) else (type(value), value)
    return _NOT_PLAIN


def _template(templar: Any, value: Any) -> bool:
    try:
        return bool(templar.is_template(value))
    except Exception:
        return True  # whatever cannot be inspected counts as a template: never reused


def _plain_object(obj: Any) -> bool:
    """Whether ``Base.post_validate`` of ``obj`` templates nothing and warns of nothing: no value it reads
    holds a template (``post_validate_attribute``'s steps: a static attribute is only checked for one, an
    attribute that is not validated on this object is not read, a validator that keeps its value as it is
    does not template it)."""
    from ansible.template import Templar

    templar = Templar()
    for name, attribute in obj.fattributes.items():
        value = getattr(obj, name)
        if name == "vars" or value is None or isinstance(value, bool | int | float):
            continue
        checked = attribute.static or attribute.always_post_validate or obj._post_validate_object
        if not checked or name in _KEPT_AS_THEY_ARE or (attribute.isa == "class" and not attribute.static):
            continue
        if not isinstance(value, str | list | dict) or _template(templar, value):
            return False
    return True


# Task attributes whose validators return the value as it is (``Task._post_validate_loop`` and friends):
# templated later, by the executor, not by ``post_validate``.
_KEPT_AS_THEY_ARE = frozenset({"loop", "changed_when", "failed_when", "until"})
