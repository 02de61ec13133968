"""The local temp dirs without a shell (``warm.tmpdirs``, ``compat.tmpdirs``): the source it mirrors is the
installed ansible-core's, a playbook of file-transferring actions gives the same results and leaves the same
dirs with no temp dir commands run, and what the mirror leaves to Ansible's path."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.compat import tmpdirs as compat_tmpdirs
from tests.unit.ansible.warm.speedups import OFF_HERE

_PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Copy a file (its action transfers files, so it makes a temp dir)
      ansible.builtin.copy:
        content: "hello {{ 6 * 7 }}\\n"
        dest: "{{ out }}/copied"
        mode: "0600"
    - name: Template a file
      ansible.builtin.template:
        src: "{{ out }}/t.j2"
        dest: "{{ out }}/templated"
        mode: "0600"
"""

_RUN = r"""
import json, os, sys
from ansible.plugins.action import ActionBase
from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import inline, tmpdirs
assert inline.install() == []  # tasks in this process, so what they run is recorded here
if sys.argv[1].startswith("hooked"):
    assert tmpdirs.install() == []
commands = []
original = ActionBase._low_level_execute_command
def recorded(self, cmd, *args, **kwargs):
    commands.append(cmd)
    return original(self, cmd, *args, **kwargs)
ActionBase._low_level_execute_command = recorded
rc = compat.run_playbook(["ansible-playbook", sys.argv[2], "-e", f"out={sys.argv[3]}"])
print(json.dumps({"rc": rc, "commands": commands}))
"""

pytestmark = pytest.mark.skipif(
    OFF_HERE, reason="local temp dirs without a shell is off on this ansible-core (test_speedups_off.py)"
)


in_process = pytest.mark.skipif(bool(compat.inline_task_problems()), reason="tasks need the worker fork here")


def test_the_installed_ansible_core_has_the_mirrored_source() -> None:
    assert compat.tmpdir_hook_problems() == []


def _play(tmp_path: Path, mode: str) -> tuple[dict[str, Any], Path]:
    home, out = tmp_path / mode / "home", tmp_path / mode / "out"
    home.mkdir(parents=True)
    out.mkdir()
    (out / "t.j2").write_text("templated {{ 1 + 1 }}\n", encoding="utf-8")
    playbook = tmp_path / "play.yml"
    playbook.write_text(_PLAYBOOK, encoding="utf-8")
    env = {**os.environ, "HOME": str(home), "ANSIBLE_PIPELINING": "true", "ANSIBLE_NOCOLOR": "1"}
    if mode.endswith("-remote-tmp"):  # parents the temp dir command makes itself
        env["ANSIBLE_REMOTE_TMP"] = str(home / "remote" / "tmp")
    else:
        env.pop("ANSIBLE_REMOTE_TMP", None)
    done = subprocess.run(
        [sys.executable, "-P", "-c", _RUN, mode, str(playbook), str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert result["rc"] == 0, done.stdout
    return result, home


def _tree(home: Path) -> list[tuple[str, str]]:
    return [(p.relative_to(home).as_posix(), oct(stat.S_IMODE(p.stat().st_mode))) for p in sorted(home.rglob("*"))]


@in_process
def test_the_same_results_and_dirs_without_the_shell(tmp_path: Path) -> None:
    hooked, hooked_home = _play(tmp_path, "hooked")
    plain, plain_home = _play(tmp_path, "plain")
    for mode in ("hooked", "plain"):
        out = tmp_path / mode / "out"
        assert (out / "copied").read_text() == "hello 42\n" and (out / "templated").read_text() == "templated 2\n"
    # What stays behind is the same: ~/.ansible/tmp (Ansible's local temp dir made it), and empty.
    assert _tree(hooked_home) == _tree(plain_home) == [(".ansible", "0o755"), (".ansible/tmp", "0o700")]
    temp_commands = [c for c in plain["commands"] if "ansible-tmp-" in c or c.strip() == "echo ~"]
    assert len(temp_commands) >= 4  # Ansible's path: echo ~, mkdir, rm for each task
    assert not [c for c in hooked["commands"] if ("ansible-tmp-" in c and "mkdir" in c) or c.strip() == "echo ~"]
    assert not [c for c in hooked["commands"] if c.startswith("rm -f -r")]


def test_remote_tmp_is_expanded_only_where_echo_prints_it_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    class Action:
        def __init__(self, remote_tmp: object, user: str | None = None) -> None:
            self.remote_tmp, self.user = remote_tmp, user

        def get_shell_option(self, _name: str, default: str) -> object:
            return self.remote_tmp

        def _get_remote_user(self) -> str | None:
            return self.user

    monkeypatch.setenv("HOME", "/home/someone")
    expand = compat_tmpdirs._expanded_remote_tmp
    assert expand(Action("~/.ansible/tmp")) == "/home/someone/.ansible/tmp"
    assert expand(Action("/var/tmp/x")) == "/var/tmp/x"
    assert expand(Action("~root/tmp")) == os.path.expanduser("~root") + "/tmp"
    for odd in ("$HOME/tmp", "/tmp/a b", "/tmp/*", "relative", "/tmp/../etc", "~no-such-user-here/tmp", None):
        assert expand(Action(odd)) is None, odd


def test_a_symbolic_link_is_left_to_rm(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(OSError):
        compat_tmpdirs._remove(f"{tmp_path / 'link'}/")
    made = compat_tmpdirs._make_dirs(str(tmp_path / "a" / "b"), "ansible-tmp-1")
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700 and stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    compat_tmpdirs._remove(made + "/")
    assert not os.path.exists(made) and (tmp_path / "a" / "b").is_dir()


@in_process
def test_the_same_parents_of_a_remote_tmp_of_its_own(tmp_path: Path) -> None:
    _hooked, hooked_home = _play(tmp_path, "hooked-remote-tmp")
    _plain, plain_home = _play(tmp_path, "plain-remote-tmp")
    made = [("remote", "0o700"), ("remote/tmp", "0o700")]  # mode 0700, as under the command's umask 77
    assert [e for e in _tree(hooked_home) if e[0].startswith("remote")] == made
    assert [e for e in _tree(plain_home) if e[0].startswith("remote")] == made
