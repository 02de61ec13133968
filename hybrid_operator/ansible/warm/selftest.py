"""The warm executor's start-up self-test: one playbook through Ansible's normal path and the warm path.

Where it sits: ``warm.WarmExecutor`` hands ``PLAYBOOK`` to its zygote as the warm-up, which the zygote runs
in itself before it changes anything in Ansible: no state reset, no module hooks, every module in a new
interpreter -- Ansible's normal path, in a fresh process. Once the zygote is ready, the executor runs the
same playbook again as a forked run: reset state, modules in Ansible's worker (``inworker``), the fork's own
RPC host -- the warm path, every touchpoint of ``compat`` in use. ``compare`` reads the two event streams;
the executor serves runs from the zygote only when they agree, and otherwise switches itself off (one log
line) and runs everything through ansible-runner.

The playbook holds what a reconcile holds: controller-side tasks (templating, a loop, an assert, a rescued
failure), an ansible-core module task with a task environment, one that fails, and a collection module
(``hybrid_operator.util.probe``, shipped with the operator, so it is always there) that reports its
environment, working directory and warning. Each run gets its own token in its extra vars: a fork that
still saw the warm-up's command line would differ.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TOKEN_VAR = "hyop_selftest_token"
PROBE_TASK = "A collection module"

PLAYBOOK = """---
# Written by hybrid-operator: the warm executor runs this once in its zygote, on Ansible's normal path
# (which also loads what every reconcile uses), and once in a fork, on the warm path, and compares them.
- name: Warm up and test the warm path
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Template, filter and test
      ansible.builtin.set_fact:
        _hyop_value: "{{ [1, 2] | map('string') | join(',') if 1 is number else '' }}/{{ hyop_selftest_token }}"
    - name: Assert
      ansible.builtin.assert:
        that: _hyop_value is match('1,2/')
        quiet: true
    - name: Loop
      ansible.builtin.debug:
        msg: "{{ item }}"
      loop: [1, 2]
    - name: Fail and rescue
      block:
        - name: Fail
          ansible.builtin.fail:
            msg: warm-up
      rescue:
        - name: Rescued
          ansible.builtin.debug:
            msg: rescued
    - name: An ansible-core module with the task's environment
      ansible.builtin.command:
        argv: [sh, -c, 'echo "$HYOP_SELFTEST_ENV {{ _hyop_value }}"; echo err >&2']
      environment:
        HYOP_SELFTEST_ENV: from-the-task
      changed_when: false
    - name: An ansible-core module that fails
      ansible.builtin.command:
        argv: [sh, -c, "exit 3"]
      changed_when: false
      failed_when: false
    - name: A collection module
      hybrid_operator.util.probe:
        data: {value: "{{ _hyop_value }}", list: [1, two]}
        env: HYOP_SELFTEST_ENV
      environment:
        HYOP_SELFTEST_ENV: from-the-task
"""

# The events whose results are compared, and what legitimately differs between two runs of one task.
_COMPARED = frozenset(
    {"runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable"}
    | {"runner_item_on_ok", "runner_item_on_failed", "runner_item_on_skipped", "playbook_on_stats"}
)
_VOLATILE = frozenset({"start", "end", "delta", "warm_process"})
_STATS = ("ok", "changed", "failures", "skipped", "rescued", "ignored", "dark")


def new_token() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Verdict:
    """What the comparison found: the differences (none: the warm path may serve) and whether the forked
    run's collection module ran in Ansible's worker (None: the probe did not report)."""

    differences: list[str]
    module_in_worker: bool | None


def compare(
    reference: Iterable[Mapping[str, Any]], reference_token: str, forked: Iterable[Mapping[str, Any]], forked_token: str
) -> Verdict:
    """Compare the normal-path run's job events with the forked run's."""
    expected, forked_events = list(reference), list(forked)
    ours, theirs = _summary(expected, reference_token), _summary(forked_events, forked_token)
    differences = []
    if not ours:
        differences.append("the reference run reported no task results")
    for index in range(max(len(ours), len(theirs))):
        want = ours[index] if index < len(ours) else None
        got = theirs[index] if index < len(theirs) else None
        if want != got:
            differences.append(f"result {index + 1}: normal path {_short(want)}, warm path {_short(got)}")
    return Verdict(differences, _probe_in_worker(forked_events))


def _summary(events: list[Mapping[str, Any]], token: str) -> list[tuple[str, str, Any]]:
    summary = []
    for event in sorted(events, key=lambda e: int(e.get("counter") or 0)):
        kind = str(event.get("event", ""))
        data = event.get("event_data") or {}
        if kind == "playbook_on_stats":
            summary.append((kind, "", {name: data.get(name) for name in _STATS}))
        elif kind in _COMPARED:
            summary.append((kind, str(data.get("task", "")), _clean(data.get("res"), token)))
    return summary


def _clean(value: Any, token: str) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _clean(v, token) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_clean(v, token) for v in value]
    if isinstance(value, str):
        return value.replace(token, "<token>")
    return value


def _probe_in_worker(events: list[Mapping[str, Any]]) -> bool | None:
    for event in events:
        data = event.get("event_data") or {}
        res = data.get("res")
        if event.get("event") == "runner_on_ok" and data.get("task") == PROBE_TASK and isinstance(res, Mapping):
            return bool(res.get("warm_process"))
    return None


def _short(entry: tuple[str, str, Any] | None, limit: int = 300) -> str:
    if entry is None:
        return "nothing"
    text = f"{entry[0]} of {entry[1]!r}: {entry[2]}" if entry[1] else f"{entry[0]}: {entry[2]}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
