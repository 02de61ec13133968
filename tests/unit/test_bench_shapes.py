"""``bench.shapes`` counts what a role is made of: checked on a small role written here."""

from __future__ import annotations

from pathlib import Path

from bench import shapes

TASKS = """---
- name: A fact
  ansible.builtin.set_fact:
    x: "{{ y | default(1) | int }}"
  when: z is defined
- name: Nested
  when: x | length > 0
  block:
    - name: Apply
      k8s:
        definition: "{{ lookup('template', 'a.j2') | from_yaml }}"
      register: applied
  rescue:
    - name: Say so
      ansible.builtin.debug:
        msg: "{{ applied | to_json }}"
      loop: "{{ [1, 2] }}"
"""


def test_counts_modules_keywords_lookups_filters_and_tests(tmp_path: Path) -> None:
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text(TASKS)
    (tmp_path / "roles" / "r" / "templates").mkdir()
    (tmp_path / "roles" / "r" / "templates" / "a.j2").write_text("n: {{ n | quote }}\n")
    counts = shapes.count([tmp_path])
    assert (counts.files, counts.tasks, counts.blocks, counts.templates) == (1, 3, 1, 1)
    assert counts.modules == {"ansible.builtin.set_fact": 1, "kubernetes.core.k8s": 1, "ansible.builtin.debug": 1}
    assert counts.keywords == {"when": 2, "block": 1, "rescue": 1, "register": 1, "loop": 1}
    assert counts.lookups == {"template": 1}
    assert counts.filters == {"default": 1, "int": 1, "length": 1, "from_yaml": 1, "to_json": 1, "quote": 1}
    assert counts.tests == {"defined": 1}
