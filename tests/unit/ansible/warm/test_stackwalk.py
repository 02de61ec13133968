"""The caller found on the stack without describing every frame first (``compat.stackwalk``): the shape it
relies on; the same frames, in the same order and described alike, as ansible-core's own ``iter_stack`` for
stacks of any depth with marked frames anywhere (hypothesis); and a real playbook run with and without it
(empty loops, whose results carry a deprecated value, and that value read): the same output, deprecation
warnings included. The hook changes Ansible for the whole process, so the playbook runs in a new interpreter."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.compat import stackwalk
from tests.unit.ansible.warm.playbooks import run_playbook
from tests.unit.ansible.warm.speedups import OFF_HERE, in_child

SWITCH = "HYBRID_OPERATOR_STACK_WALK_HOOK"
pytestmark = pytest.mark.skipif(OFF_HERE, reason="2.18 has no _stack module: the hook is never installed")


def test_the_installed_ansible_core_has_the_shape() -> None:
    assert compat.stack_walk_problems("UNSET") == []


def test_the_switch_leaves_it_out(monkeypatch: Any) -> None:
    monkeypatch.setenv(SWITCH, "0")
    assert compat.stack_walk_problems(SWITCH) == [f"{SWITCH}=0"]


def _both_walks() -> tuple[list[inspect.FrameInfo], list[inspect.FrameInfo]]:
    from ansible.module_utils._internal import _stack

    _skip_stackwalk = True  # this helper is the walk's machinery, as a caller's marked frames are
    return list(_stack.iter_stack()), list(stackwalk.lazy_iter_stack())


def _nest(marks: list[bool], leaf: Callable[[], Any]) -> Any:
    """Call ``leaf`` under one frame per mark, outermost first; a frame with True carries the skip local."""
    if not marks:
        return leaf()
    if marks[0]:
        _skip_stackwalk = True
        return _nest(marks[1:], leaf)
    return _nest(marks[1:], leaf)


def _described(info: inspect.FrameInfo) -> tuple[Any, ...]:
    positions = info.positions  # type: ignore[attr-defined]
    return (info.frame, info.filename, info.lineno, info.function, info.code_context, info.index, positions)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), max_size=40))
def test_the_same_frames_as_ansibles_own_walk(marks: list[bool]) -> None:
    original, lazy = _nest(marks, _both_walks)
    assert len(lazy) == len(original) > 0
    assert [_described(info) for info in lazy] == [_described(info) for info in original]
    assert all("_skip_stackwalk" not in info.frame.f_locals for info in lazy)


def test_frames_are_described_only_when_reached(monkeypatch: Any) -> None:
    described: list[object] = []
    real = stackwalk.described
    monkeypatch.setattr(stackwalk, "described", lambda frame: described.append(frame) or real(frame))
    first = next(_nest([False] * 30, stackwalk.lazy_iter_stack))
    assert described == [first.frame]  # one frame described of the 30-odd on the stack


_PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: An empty loop
      ansible.builtin.debug: {msg: "{{ item }}"}
      loop: "{{ [] }}"
      register: looped
    - name: Its deprecated value read
      ansible.builtin.debug: {msg: "{{ looped.skipped_reason }} / {{ looped.skipped }}"}
    - name: An empty loop in a block
      block:
        - ansible.builtin.set_fact: {x: "{{ item }}"}
          loop: []
          register: again
    - ansible.builtin.debug: {msg: "{{ again.skipped_reason | length }}"}
"""
_COUNTERS = """
def install_counters(counts, workdir):
    pass

def finish_counters(counts, workdir):
    pass
"""


def test_a_playbook_gives_the_same_output_and_warnings(tmp_path: Path) -> None:
    plain = run_playbook(tmp_path / "plain", "plain", "stack_walk", {"play.yml": _PLAY}, _COUNTERS)
    hooked = run_playbook(tmp_path / "hooked", "hooked", "stack_walk", {"play.yml": _PLAY}, _COUNTERS)
    assert plain["rc"] == hooked["rc"] == 0, plain["stdout"]
    assert hooked["stdout"] == plain["stdout"]
    assert "No items in the list / True" in plain["stdout"]


def test_a_deprecation_names_the_same_plugin(monkeypatch: Any) -> None:
    from ansible.module_utils._internal import _deprecator, _stack
    from ansible.plugins.action import debug

    # A call from a frame of the debug action's file, as the action itself would make it.
    scope: dict[str, Any] = {}
    exec(compile("def call(f):\n    return f()\n", str(debug.__file__), "exec"), scope)
    want = scope["call"](_deprecator.get_caller_plugin_info)
    monkeypatch.setattr(_stack, "iter_stack", stackwalk.lazy_iter_stack)
    got = scope["call"](_deprecator.get_caller_plugin_info)
    assert got == want
    assert want is not None and want.resolved_name == "ansible.builtin.debug"


def test_the_zygotes_hook_is_the_lazy_walk() -> None:
    script = (
        "import json; from hybrid_operator.ansible import compat; "
        "from ansible.module_utils._internal import _stack; before = _stack.iter_stack; "
        "original = compat.walk_stack_lazily(); "
        "print(json.dumps([original is before, _stack.iter_stack.__name__, _stack.caller_frame().function]))"
    )
    assert in_child(script) == [True, "lazy_iter_stack", "<module>"]
