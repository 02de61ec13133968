"""Playbooks loaded ahead (``warm.plays``, ``compat.plays``): the shape they rely on, that a run gets the tree
a load of its own would build, with its own loader and variable manager, once; that anything the load
depended on changing (a task file edited, a role found elsewhere first, the verbosity, the tags) makes the run
load for itself; and what keeps a playbook out (a role or imported file named by a template, so by the run's
variables; an imported playbook; a role that brings plugins; a message at load; a relative path). Each check
runs in a child interpreter: loading sets Ansible's command line and plugin loaders for the whole process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.compat.versions import ansible_version
from hybrid_operator.ansible.warm import plays

pytestmark = pytest.mark.skipif(
    ansible_version()[:2] < compat.plays.MIN_VERSION, reason="playbooks are loaded ahead on ansible-core 2.21 on"
)

_CHILD = r"""
import gc, json, os, sys
from pathlib import Path
from ansible.cli.playbook import PlaybookCLI
from ansible.plugins.loader import init_plugin_loader

path, action = sys.argv[1], sys.argv[2]
PlaybookCLI(["ansible-playbook", *sys.argv[3:], path]).parse()
init_plugin_loader([])
from ansible.parsing.dataloader import DataLoader
from ansible.playbook import Playbook
from ansible.utils.display import Display
from ansible.vars.manager import VariableManager
from hybrid_operator.ansible.compat import plays

def shape(playbook):
    out = []
    for play in playbook.get_plays():
        for role in play.get_roles():
            for block in role.get_task_blocks():
                for task in block.block:
                    tasks = task.block if hasattr(task, "block") else [task]
                    out += [[t.get_name(), t.action, repr(t.args), repr(t.when)] for t in tasks]
    return out

entry = plays.preload(path)
if isinstance(entry, str):
    print(json.dumps({"left": entry}))
    sys.exit()
out = {"left": ""}
if action == "edit":
    tasks = Path(path).parents[1] / "shared" / "roles" / "r" / "tasks" / "main.yml"
    tasks.write_text(tasks.read_text() + "- ansible.builtin.debug: {msg: added}\n")
elif action == "shadow":  # the same role name, found first beside the playbook
    (Path(path).parent / "roles" / "r" / "tasks").mkdir(parents=True)
    (Path(path).parent / "roles" / "r" / "tasks" / "main.yml").write_text("- ansible.builtin.debug: {}\n")
elif action == "verbose":
    Display().verbosity = 2
out["reusable"] = plays.reusable(entry)
if action == "verbose":  # what the load said at -vv, said by the run that takes it; a load of its own, alike
    import contextlib, io
    for name, load in (("taken", lambda l, m: plays.adopt(entry, l, m)), ("own", lambda l, m: Playbook.load(
        path, variable_manager=m, loader=l
    ))):
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
            loader = DataLoader()
            load(loader, VariableManager(loader=loader))
        out[name] = shown.getvalue()
if action == "adopt":
    loader = DataLoader()
    manager = VariableManager(loader=loader)
    own = Playbook.load(path, variable_manager=manager, loader=loader)
    taken = plays.adopt(entry, loader, manager)
    out["same"] = shape(taken) == shape(own) and len(shape(own)) > 0
    out["tasks"] = len(shape(own))
    out["again"] = plays.reusable(entry)
    referrers = gc.get_referrers(entry.loader, entry.variable_manager)
    # Left: the entry itself, this frame, and the zygote's variable manager holding its own loader.
    out["held"] = sorted({type(r).__name__ for r in referrers if r is not entry and not hasattr(r, "f_code")})
    out["run's"] = all(
        getattr(t, "_loader") is loader and getattr(t, "_variable_manager") is manager
        for play in taken.get_plays() for role in play.get_roles() for block in role.get_task_blocks()
        for t in block.block
    )
if action == "hook":
    plays.hook_preloaded({path: entry}, lambda p: out.setdefault("taken", []).append(p))
    first = Playbook.load(path, variable_manager=VariableManager(loader=DataLoader()), loader=DataLoader())
    second = Playbook.load(path, variable_manager=VariableManager(loader=DataLoader()), loader=DataLoader())
    out["first is the zygote's"] = first is entry.playbook
    out["second is its own"] = second is not entry.playbook and shape(second) == shape(first)
print(json.dumps(out))
"""

_ROLE = "- name: Say\n  ansible.builtin.debug:\n    msg: '{{ greeting | default(\"hi\") }}'\n  when: x is defined\n"


def _project(tmp_path: Path, playbook: str = "", tasks: str = _ROLE, files: dict[str, str] | None = None) -> Path:
    roles = tmp_path / "shared" / "roles"
    for name, text in {"r/tasks/main.yml": tasks, "r/defaults/main.yml": "greeting: hello\n", **(files or {})}.items():
        (roles / name).parent.mkdir(parents=True, exist_ok=True)
        (roles / name).write_text(text, encoding="utf-8")
    book = tmp_path / "playbooks" / "run.yml"
    book.parent.mkdir()
    book.write_text(
        playbook or "- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: r\n", encoding="utf-8"
    )
    return book


def _child(book: Path, action: str = "", *args: str) -> dict[str, Any]:
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(book.parents[1] / "shared" / "roles")}
    env.pop("ANSIBLE_VERBOSITY", None)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(book), action, *args],
        capture_output=True, text=True, env=env, cwd=book.parent, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_installed_ansible_core_has_the_shape() -> None:
    assert compat.preload_problems() == []


def test_a_run_gets_the_tree_its_own_load_builds_with_its_own_loader_once(tmp_path: Path) -> None:
    out = _child(_project(tmp_path), "adopt")
    assert out["left"] == "" and out["reusable"] and out["same"] and out["tasks"] >= 1
    # Nothing in the tree keeps the zygote's loader or variable manager (only that manager, its loader).
    assert out["run's"] and out["held"] == ["VariableManager"]
    assert out["again"] is False  # a second load in the same run is Ansible's own


def test_the_hook_answers_the_first_load_only(tmp_path: Path) -> None:
    out = _child(_project(tmp_path), "hook")
    assert out["first is the zygote's"] and out["second is its own"] and len(out["taken"]) == 1


@pytest.mark.parametrize("action", ["edit", "shadow"])
def test_what_the_load_depended_on_changing_makes_the_run_load_for_itself(tmp_path: Path, action: str) -> None:
    assert _child(_project(tmp_path), action) == {"left": "", "reusable": False}


def test_what_the_load_says_at_a_verbosity_the_run_that_takes_it_says(tmp_path: Path) -> None:
    """An import says "statically imported: ..." at -vv while it loads (operator-sdk runs at -vv): the zygote
    keeps it, and a run that takes the load shows what its own load would have shown."""
    imports = {"r/tasks/more.yml": _ROLE}
    book = _project(tmp_path, tasks=_ROLE + "- ansible.builtin.import_tasks: more.yml\n", files=imports)
    out = _child(book, "verbose")
    assert out["reusable"] and "statically imported" in out["own"] and out["taken"] == out["own"]


def test_other_tags_than_the_zygotes_make_the_run_load_for_itself(tmp_path: Path) -> None:
    book = _project(tmp_path)
    assert _child(book, "", "--tags", "x")["reusable"] is True  # loaded and asked with the same tags
    # The zygote loads with the warm-up's command line; a run with --tags is another one.
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.replace("out[\"reusable\"] = plays.reusable(entry)", (
            "from ansible import context\n"
            "context.CLIARGS._store = {**context.CLIARGS._store, 'tags': ('other',)}\n"
            "out['reusable'] = plays.reusable(entry)"
        )), str(book), ""],
        capture_output=True, text=True, cwd=book.parent, timeout=120, check=False,
        env={**os.environ, "ANSIBLE_ROLES_PATH": str(book.parents[1] / "shared" / "roles")},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["reusable"] is False


@pytest.mark.parametrize(
    ("playbook", "files", "why"),
    [
        # The role named by a variable (a CR's value, in a run): frozen, it would ignore the run's.
        ("- hosts: localhost\n  roles:\n    - role: \"{{ which | default('r') }}\"\n", {}, "holds a template"),
        (
            "- hosts: localhost\n  tasks:\n    - ansible.builtin.import_tasks: \"{{ where | default('t.yml') }}\"\n",
            {},
            "holds a template",
        ),
        ("- ansible.builtin.import_playbook: other.yml\n", {}, "imports a playbook"),
        ("", {"r/library/mine.py": "# a module of the role's own\n"}, "plugin directory"),
        ("- hosts: localhost\n  roles:\n    - role: r\n      a: 1\n      a: 2\n", {}, "shows a message"),
    ],
)
def test_what_keeps_a_playbook_out(tmp_path: Path, playbook: str, files: dict[str, str], why: str) -> None:
    book = _project(tmp_path, playbook, files=files)
    (book.parent / "other.yml").write_text("- hosts: localhost\n  tasks: []\n", encoding="utf-8")
    (book.parent / "t.yml").write_text("- ansible.builtin.debug: {}\n", encoding="utf-8")
    assert why in _child(book)["left"]


def test_a_relative_path_is_left_to_the_runs() -> None:
    assert compat.preload("playbooks/run.yml") == "not an absolute path"


def test_switched_off_or_without_the_lean_path_nothing_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    assert plays.preload(["/nonexistent/run.yml"], lean_on=False) == []
    monkeypatch.setenv(plays.DISABLE_ENV, "0")
    assert plays.preload(["/nonexistent/run.yml"], lean_on=True) == [f"{plays.DISABLE_ENV}=0"]
    assert plays.PRELOADED == {}


def test_the_warm_up_names_the_watches_playbooks_first_and_at_most_the_bound(tmp_path: Path) -> None:
    """The executor's side: the playbooks watches.yaml names, then a wrapper for each role (by path, then on
    the roles path), never more than ``MAX_PLAYBOOKS`` in all, whatever the project holds."""
    from hybrid_operator.ansible.running import ExecutorSettings
    from hybrid_operator.ansible.warm.executor import WarmExecutor

    roles = tmp_path / "roles"
    for index in range(plays.MAX_PLAYBOOKS + 10):
        (roles / f"r{index:03}" / "tasks").mkdir(parents=True)
    (roles / ".hidden" / "tasks").mkdir(parents=True)
    (roles / "not-a-role").mkdir()
    named = (tmp_path / "site.yml", tmp_path / "cleanup.yml")
    settings = ExecutorSettings(artifacts_root=tmp_path / "runs", roles_paths=(roles,), prepared_playbooks=named)
    executor = WarmExecutor(settings)  # not started: no zygote
    try:
        ahead = executor._playbooks_ahead()
        assert ahead[:2] == [str(path) for path in named] and len(ahead) == plays.MAX_PLAYBOOKS
        wrapper = Path(ahead[2])
        assert wrapper.name.startswith("r000-") and 'role: "r000"' in wrapper.read_text()
        assert not any(".hidden" in path or "not-a-role" in path for path in ahead)
    finally:
        executor.close()
