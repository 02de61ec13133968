"""The caller Ansible looks for on its stack, found without describing every frame of the stack first.

Where it sits: the zygote (``warm.zygote``, through ``warm.smallhooks``) calls ``walk_stack_lazily`` after its
warm-up, so every run inherits it (and every module that runs in a run's process or in a fork of it).

Since ansible-core 2.19, whenever Ansible tags a value as deprecated or records a deprecation or a warning on
behalf of "whoever called", it looks for the first frame of its stack not marked as its own machinery
(``ansible/module_utils/_internal/_stack.py``: ``caller_frame`` takes the first frame ``iter_stack`` yields). To
find that one frame, ``iter_stack`` calls ``inspect.stack()``, which describes every frame of the stack at
once: its module found by scanning ``sys.modules``, its source file found and a line of source read, for
each of the 60-100 frames of a run's task. A task skipped for an empty loop pays it on every run
(``set_skipped`` tags the result's deprecated ``skipped_reason``): ~10 ms of CPU a task on this machine,
twice what a whole ``debug`` task costs on the lean path; a module that warns of a deprecated option pays it
per warning.

The hook gives ``iter_stack`` the same frames in the same order, each with the same ``inspect.FrameInfo``
(made by ``inspect.getframeinfo`` with one line of context, as ``inspect.stack()`` makes it), the marked ones
skipped as before, but each described only when the caller asks for it: the frames themselves are collected
first (a walk up ``f_back``, the frames ``inspect.stack()`` would have described), so what a later ``next()``
sees does not depend on when it is asked. Checked before it goes in: the module is the one 2.19-2.21 ship
(its source read for the three lines it is made of). ``HYBRID_OPERATOR_STACK_WALK_HOOK=0`` in the
operator's environment leaves it out (read by the zygote).
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Iterator
from types import FrameType, ModuleType

_SKIP_MARK = "_skip_stackwalk"
# What ``iter_stack`` is made of in the minors this was read from (2.19-2.21).
_SHAPE = (
    "for frame_info in _inspect.stack():",
    "if '_skip_stackwalk' in frame_info.frame.f_locals:",
    "yield frame_info",
)


def _stack_module() -> ModuleType:
    import importlib

    return importlib.import_module("ansible.module_utils._internal._stack")  # 2.19 and later


def stack_walk_problems(switch: str) -> list[str]:
    """Why ``walk_stack_lazily`` is not to be installed: the environment variable ``switch`` is ``0``, or this
    ansible-core has no ``_stack`` module of the expected shape (2.18 has none)."""
    if os.environ.get(switch) == "0":
        return [f"{switch}=0"]
    try:
        module = _stack_module()
        source = inspect.getsource(module.iter_stack)
        caller = inspect.getsource(module.caller_frame)
    except Exception as exc:
        return [f"ansible.module_utils._internal._stack: {type(exc).__name__}: {exc}"]
    problems = [f"_stack.iter_stack: no {line!r}" for line in _SHAPE if line not in source]
    if "next(iter_stack(), None)" not in caller:
        problems.append("_stack.caller_frame: does not take the first frame of iter_stack()")
    return problems


def frames_from(frame: FrameType | None) -> list[FrameType]:
    """``frame`` and every frame that called it, innermost first (the frames ``inspect.stack()`` describes)."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def described(frame: FrameType) -> inspect.FrameInfo:
    """``frame`` as ``inspect.stack()`` describes it (``inspect.getouterframes`` with one line of context)."""
    info = inspect.getframeinfo(frame, 1)
    return inspect.FrameInfo(frame, *info, positions=info.positions)


def lazy_iter_stack() -> Iterator[inspect.FrameInfo]:
    """``_stack.iter_stack``: the frames of the stack not marked with a ``_skip_stackwalk`` local, innermost
    first, each described when it is reached."""
    _skip_stackwalk = True  # this frame is machinery too, as the original's is (and is skipped as such)
    # From the frame that asked (the original starts at its own frame, marked): the list never holds the
    # generator's own frame, which would hold the list.
    for frame in frames_from(sys._getframe(1)):
        if _SKIP_MARK in frame.f_locals:
            continue
        yield described(frame)


def walk_stack_lazily() -> Callable[[], Iterator[inspect.FrameInfo]]:
    """Install the hook (see the module docstring; check ``stack_walk_problems`` first); the original."""
    module = _stack_module()
    original: Callable[[], Iterator[inspect.FrameInfo]] = module.iter_stack
    setattr(module, "iter_stack", lazy_iter_stack)  # noqa: B010  # a module attribute mypy cannot see
    return original
