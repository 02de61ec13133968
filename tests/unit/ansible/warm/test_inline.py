"""The in-process task path (``inline``): which tasks it takes, and that ansible-core still has the shape
``compat.run_task_inline`` mirrors. The end-to-end comparison with ansible-runner is in
``tests/integration/test_warm_executor.py``.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.compat import tasks as compat_tasks
from hybrid_operator.ansible.warm import inline

_PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Where this task runs
      ansible.builtin.debug:
        msg: "pid {{ lookup('ansible.builtin.pipe', 'echo $PPID') }}"
    - name: A loop with a register
      ansible.builtin.set_fact:
        seen: "{{ (seen | default([])) + [item] }}"
      loop: [1, 2, 3]
      changed_when: true
      notify: Say it
    - name: A host added at run time (needs the strategy while it runs)
      ansible.builtin.add_host:
        name: other
        groups: added
        ansible_connection: local
    - name: A group made at run time
      ansible.builtin.group_by:
        key: "made_{{ seen | length }}"
  handlers:
    - name: Say it
      ansible.builtin.debug:
        msg: "seen {{ seen }}"

- hosts: made_3
  gather_facts: false
  tasks:
    - name: In the group made at run time
      ansible.builtin.debug:
        msg: "in made_3"
"""

_RUN = """
import os, sys
print("controller", os.getpid(), flush=True)
from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import inline
if sys.argv[1] == "inline":
    assert inline.install() == []
sys.exit(compat.run_playbook(["ansible-playbook", sys.argv[2]]))
"""


def test_local_tasks_run_here_and_the_others_keep_their_worker() -> None:
    assert inline.runs_here("ansible.builtin.debug", "local", delegated=False)
    assert inline.runs_here("kubernetes.core.k8s", "local", delegated=False)
    assert not inline.runs_here("ansible.builtin.debug", "ssh", delegated=False)
    assert not inline.runs_here("ansible.builtin.debug", "local", delegated=True)
    for action in ("add_host", "ansible.builtin.group_by", "ansible.legacy.pause"):
        assert not inline.runs_here(action, "local", delegated=False)


def test_the_installed_ansible_core_has_the_shape_or_says_why_not() -> None:
    major, minor, _full = compat.ansible_version()
    problems = compat.inline_task_problems()
    if (major, minor) in compat_tasks._INLINE_MINORS:
        assert problems == []
    else:
        assert problems and "worker differs" in problems[0]


def _play(tmp_path: Path, mode: str) -> tuple[str, str]:
    playbook = tmp_path / "play.yml"
    playbook.write_text(_PLAYBOOK, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-P", "-c", _RUN, mode, str(playbook)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    controller = done.stdout.splitlines()[0].split()[1]
    return controller, done.stdout


@pytest.mark.skipif(bool(compat.inline_task_problems()), reason="this ansible-core keeps the worker fork")
def test_a_playbook_gives_the_same_output_in_process(tmp_path: Path) -> None:
    controller, inline_out = _play(tmp_path, "inline")
    forked_controller, forked_out = _play(tmp_path, "forked")
    assert f'"msg": "pid {controller}"' in inline_out  # the task ran in the playbook's own process
    assert f'"msg": "pid {forked_controller}"' not in forked_out  # ... and in a worker without the hook
    assert "seen [1, 2, 3]" in inline_out and "in made_3" in inline_out
    strip = [line for line in inline_out.splitlines()[1:] if "pid " not in line]
    assert strip == [line for line in forked_out.splitlines()[1:] if "pid " not in line]


_LOOP_PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: A loop, its items sent as callbacks
      ansible.builtin.debug:
        msg: "item {{ item }}"
      loop: [1, 2]
    - name: A task that fails and is ignored
      ansible.builtin.fail:
        msg: failed on purpose
      ignore_errors: true
"""

_COUNT = """
import collections, json, sys
from ansible.executor.task_queue_manager import FinalQueue
from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import inline
assert inline.install() == []
sent = collections.Counter()
put = FinalQueue.put
def counted(self, obj, *args, **kwargs):
    sent[type(obj).__name__] += 1
    return put(self, obj, *args, **kwargs)
FinalQueue.put = counted
rc = compat.run_playbook(["ansible-playbook", sys.argv[1]])
print(json.dumps({"rc": rc, "sent": sent}))
"""


def _counted(tmp_path: Path, script: str, playbook_text: str) -> tuple[str, dict[str, Any]]:
    """Run ``playbook_text`` through a child running ``script``: its output, and the counts it printed last
    (the playbook's exit code checked to be 0)."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(playbook_text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-P", "-c", script, str(playbook)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert out["rc"] == 0
    return done.stdout, out


@pytest.mark.skipif(bool(compat.inline_task_problems()), reason="this ansible-core keeps the worker fork")
def test_in_process_tasks_hand_their_results_over_without_the_queue(tmp_path: Path) -> None:
    stdout, out = _counted(tmp_path, _COUNT, _LOOP_PLAYBOOK)
    assert "item 1" in stdout and "item 2" in stdout and "...ignoring" in stdout
    assert out["sent"].get("WireTaskResult", 0) == 0 and out["sent"].get("CallbackSend", 0) == 0, out["sent"]


_QUEUES = """
import collections, json, sys
from multiprocessing import queues
made = collections.Counter()
init = queues.Queue.__init__
def counted(self, *args, **kwargs):
    made[type(self).__name__] += 1
    return init(self, *args, **kwargs)
queues.Queue.__init__ = counted
from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import inline
assert inline.install() == []
rc = compat.run_playbook(["ansible-playbook", sys.argv[1]])
print(json.dumps({"rc": rc, "made": made}))
"""


@pytest.mark.skipif(bool(compat.inline_task_problems()), reason="this ansible-core keeps the worker fork")
def test_only_worker_slots_that_fork_make_a_prompt_queue(tmp_path: Path) -> None:
    # _PLAYBOOK: four tasks (a handler among them) run here; add_host and group_by fork Ansible's worker.
    stdout, out = _counted(tmp_path, _QUEUES, _PLAYBOOK)
    assert "seen [1, 2, 3]" in stdout and "in made_3" in stdout  # the forked slots did their work
    assert out["made"].get("WorkerQueue", 0) == 2, out["made"]  # one per forked slot, made before its fork


_RPC = """
import json, sys
from ansible._internal import _rpc_host
started = []
start = _rpc_host.LocalManager.start
def counted(self, *args, **kwargs):
    started.append(True)
    return start(self, *args, **kwargs)
_rpc_host.LocalManager.start = counted
from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import inline
assert inline.install() == []
rc = compat.run_playbook(["ansible-playbook", sys.argv[1]])
print(json.dumps({"rc": rc, "started": len(started), "deferred": compat.rpchost.deferred()}))
"""


@pytest.mark.skipif(bool(compat.inline_task_problems()), reason="this ansible-core keeps the worker fork")
@pytest.mark.skipif(compat.ansible_version()[:2] < (2, 21), reason="no RPC server before ansible-core 2.21")
@pytest.mark.parametrize(("playbook", "started"), [(_LOOP_PLAYBOOK, 0), (_PLAYBOOK, 1)], ids=["local", "add_host"])
def test_the_rpc_server_is_started_only_for_a_forked_worker(tmp_path: Path, playbook: str, started: int) -> None:
    # Local tasks only: nothing calls the server, so it is never started. add_host and group_by fork a worker
    # that calls it: started once, before the first fork, and the inventory they changed is the one used.
    stdout, out = _counted(tmp_path, _RPC, playbook)
    assert out["started"] == started and out["deferred"], out
    if started:
        assert "seen [1, 2, 3]" in stdout and "in made_3" in stdout


@pytest.mark.skipif(bool(compat.inline_task_problems()), reason="this ansible-core keeps the worker fork")
@pytest.mark.skipif(compat.ansible_version()[:2] < (2, 21), reason="no RPC server before ansible-core 2.21")
def test_the_rpc_server_starts_with_the_run_when_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(inline.LAZY_RPC_ENV, "0")
    _stdout, out = _counted(tmp_path, _RPC, _LOOP_PLAYBOOK)
    assert out["started"] == 1 and not out["deferred"], out


# What a task's result holds: JSON-like data, Ansible's tagged strings and containers among it.
_RESULT_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4) | st.tuples(inner, inner)
    ),
    max_leaves=20,
)


def _tagged_text() -> Any:
    """A string carrying one of Ansible's data tags, or None on a core without them (2.18)."""
    try:
        from ansible.module_utils._internal._datatag import AnsibleTagHelper
        from ansible.module_utils._internal._datatag._tags import Deprecated
    except ImportError:
        return None
    return AnsibleTagHelper.tag("text", [Deprecated(msg="old")])


@settings(max_examples=200, deadline=None)
@given(_RESULT_VALUES, st.booleans())
def test_a_result_is_pickled_to_the_bytes_the_results_queue_would_carry(value: Any, tagged: bool) -> None:
    from multiprocessing.reduction import ForkingPickler

    if tagged and (text := _tagged_text()) is not None:
        value = {"msg": text, "value": value}
    assert compat_tasks._pickled(value) == bytes(ForkingPickler.dumps(value))


class _OnlyTheQueueCanPickleIt:
    """As a socket or a connection: plain pickle refuses it, ``ForkingPickler`` has a reducer for it."""

    def __reduce__(self) -> Any:
        raise TypeError("cannot pickle this outside multiprocessing")


def _rebuilt() -> _OnlyTheQueueCanPickleIt:
    return _OnlyTheQueueCanPickleIt.__new__(_OnlyTheQueueCanPickleIt)


def test_what_only_the_queues_pickler_can_pickle_is_pickled_by_it() -> None:
    from multiprocessing.reduction import ForkingPickler

    ForkingPickler.register(_OnlyTheQueueCanPickleIt, lambda _obj: (_rebuilt, ()))
    value = {"handle": _OnlyTheQueueCanPickleIt()}
    with pytest.raises(TypeError):
        pickle.dumps(value)
    assert compat_tasks._pickled(value) == bytes(ForkingPickler.dumps(value))
    assert isinstance(pickle.loads(compat_tasks._pickled(value))["handle"], _OnlyTheQueueCanPickleIt)


def test_the_result_field_mappings_are_warmed_as_ansible_calls_them() -> None:
    """What the zygote fills is what a run's task results then read: Ansible's own calls hit the caches."""
    task_module = pytest.importorskip("ansible._internal._task")
    if not hasattr(task_module, "UnifiedTaskResult"):
        assert not compat.warm_result_mappings()
        pytest.skip("this ansible-core has no UnifiedTaskResult")
    UnifiedTaskResult = task_module.UnifiedTaskResult

    assert compat.warm_result_mappings()
    by_result_key = UnifiedTaskResult.get_result_key_to_resolved_field_mapping
    by_field_name = UnifiedTaskResult._get_field_name_to_result_key_mapping
    result_key_hits, field_name_hits = by_result_key.cache_info().hits, by_field_name.cache_info().hits
    result = UnifiedTaskResult.from_action_result_dict({"changed": True, "msg": "hi"})
    result.as_result_dict(for_callback=True)
    module_result = UnifiedTaskResult.from_module_result_dict({"changed": False})
    module_result.as_result_dict()
    assert by_result_key.cache_info().hits == result_key_hits + 2
    assert by_field_name.cache_info().hits >= field_name_hits + 2
    assert by_result_key.cache_info().currsize == 2 and by_field_name.cache_info().currsize == 4
