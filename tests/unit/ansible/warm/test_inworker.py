"""What the in-worker module path relies on in ansible-core, checked against ansible-core itself.

``inworker`` reads the module's Python name out of the AnsiballZ wrapper Ansible builds, runs that
wrapper in a fork of the current process, and must then behave as the interpreter would. If an
ansible-core release changes the wrapper's shape, these tests fail (and the warm executor would quietly
fall back to the slow path, which ``test_a_built_wrapper_names_its_module`` makes loud).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import inworker

_BUILD = """
import json, sys
from pathlib import Path
import ansible.modules
from ansible.executor import module_common
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar

init_plugin_loader()
if len(sys.argv) > 4:  # the zips of shareable modules go to a shared cache under this root
    from hybrid_operator.ansible import compat
    from hybrid_operator.ansible.warm import inworker
    policy = compat.ModulePolicy(inworker.importable_as, inworker.shareable, inworker.run_wrapper)
    compat.hook_modules(policy, sys.argv[4])
module, args = sys.argv[1], json.loads(sys.argv[2])
path = str(Path(ansible.modules.__file__).parent / f"{module}.py")
built = module_common.modify_module(
    module_name=module,
    module_path=path,
    module_args={**args, "_ansible_check_mode": False, "_ansible_no_log": False},
    templar=Templar(loader=DataLoader()),
    task_vars={"ansible_python_interpreter": sys.executable},
)
Path(sys.argv[3]).write_bytes(built[0] if isinstance(built, tuple) else built.b_module_data)  # 2.18: a tuple
print(path)
"""


def build(module: str, args: dict[str, object], tmp_path: Path, shared: Path | None = None) -> tuple[bytes, str]:
    """The pipelined AnsiballZ wrapper Ansible sends for ``ansible.builtin.<module>``, built by
    ansible-core itself (in a process of its own: building configures Ansible's collection loader);
    with ``shared``, through the module hooks that cache its zip there."""
    out = tmp_path / f"{module}.wrapper"
    done = subprocess.run(
        [sys.executable, "-P", "-c", _BUILD, module, json.dumps(args), str(out), *([str(shared)] if shared else [])],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    return out.read_bytes(), done.stdout.strip()


def test_a_built_wrapper_names_its_module(tmp_path: Path) -> None:
    wrapper, path = build("ping", {"data": "x"}, tmp_path)
    assert compat.module_fqn(wrapper) == "ansible.modules.ping"
    assert inworker.importable_as("ansible.modules.ping", path)
    assert inworker.shareable(path)


def test_a_shareable_modules_zip_is_cached_under_the_shared_root(tmp_path: Path) -> None:
    """However the minor calls ``_find_module_utils`` (2.18: by position, later: by keyword)."""
    shared = tmp_path / "shared"
    wrapper, _path = build("ping", {"data": "x"}, tmp_path, shared)
    assert compat.module_fqn(wrapper) == "ansible.modules.ping"
    (entry,) = shared.iterdir()  # one dir per module source
    assert any("ping" in cached.name for cached in entry.rglob("*") if cached.is_file())
    build("ping", {"data": "y"}, tmp_path, shared)
    assert len(list(shared.iterdir())) == 1  # the same source: the same cache, whatever the arguments


def test_not_a_wrapper_and_not_the_same_file() -> None:
    assert compat.module_fqn(b"#!/bin/sh\necho hi\n") is None
    assert not inworker.importable_as("ansible.modules.ping", "/elsewhere/library/ping.py")
    assert not inworker.importable_as("no.such.module", "/x.py")
    assert not inworker.shareable("/project/roles/r/library/mine.py")


def test_a_module_run_in_a_fork_answers_as_in_a_new_interpreter(tmp_path: Path) -> None:
    wrapper, _path = build("command", {"_raw_params": "sh -c 'echo out; echo err >&2; echo $HYOP_T; pwd'"}, tmp_path)
    rc, out, err = inworker.run_wrapper(wrapper, {"HYOP_T": "from-env"}, str(tmp_path))
    fresh = subprocess.run(
        [sys.executable], input=wrapper, capture_output=True, cwd=tmp_path, env={**os.environ, "HYOP_T": "from-env"}
    )
    assert rc == fresh.returncode == 0
    ours, theirs = json.loads(out), json.loads(fresh.stdout)
    assert ours["stdout"] == theirs["stdout"] == f"out\nfrom-env\n{tmp_path}"
    assert ours["stderr"] == theirs["stderr"] == "err"
    assert sorted(ours) == sorted(theirs)
    assert err == fresh.stderr
    assert "HYOP_T" not in os.environ  # the task's environment stayed in the child


def test_a_failing_and_a_killed_module_report_as_the_shell_would(tmp_path: Path) -> None:
    wrapper, _path = build("command", {"_raw_params": "false"}, tmp_path)
    rc, out, _err = inworker.run_wrapper(wrapper, {}, None)
    assert rc == 1 and json.loads(out)["rc"] == 1
    killer, _path = build("command", {"_raw_params": "sh -c 'kill -9 $PPID; sleep 5'"}, tmp_path)
    # A killed module leaves its unpacked payload in its temp dir: this test's, not the machine's /tmp.
    rc, out, _err = inworker.run_wrapper(killer, {"TMPDIR": str(tmp_path)}, None)
    assert rc == 128 + 9 and out == b""


def test_the_child_runs_modules_as_a_module_process_would() -> None:
    """Importing Ansible's controller flips ``ansible.module_utils`` into controller mode (warnings go to
    the display instead of into the result); a module process must not run that way."""
    if compat.ansible_version()[:2] < (2, 19):
        pytest.skip("2.18 has no controller mode: test_the_controllers_warnings_never_reach_a_module covers it")
    import ansible.utils.display  # noqa: F401 - the controller import that flips the switch
    from ansible.module_utils import _internal
    from ansible.module_utils._internal import _traceback

    assert _internal.is_controller
    assert _traceback._is_traceback_enabled is not _traceback._is_module_traceback_enabled
    assert hasattr(_traceback, "_is_module_traceback_enabled")


@pytest.mark.parametrize(
    ("cmd", "ours"),
    [
        (shlex.quote(sys.executable), True),
        (f"K8S_AUTH_KUBECONFIG=/tmp/k LANG=C {shlex.quote(sys.executable)}", True),
        ("/usr/bin/python3", False),  # the project's inventory names another interpreter: its libraries
        (f"{shlex.quote(sys.executable)}.other", False),
        ("'unterminated", False),
        ("", False),
    ],
)
def test_modules_run_in_the_worker_only_for_this_interpreter(cmd: str, ours: bool) -> None:
    assert compat.runs_this_interpreter(cmd) is ours


def test_the_controllers_warnings_never_reach_a_module(tmp_path: Path) -> None:
    """What the controller collected through ``ansible.module_utils`` (2.18: the argument-spec checks of action
    plugins add to the lists a module returns) is gone in the module's process, as in a new interpreter."""
    from ansible.module_utils.common import warnings

    wrapper, _path = build("ping", {"data": "x"}, tmp_path)
    warnings.warn("left by the controller")
    try:
        rc, out, _err = inworker.run_wrapper(wrapper, {}, str(tmp_path))
    finally:  # 2.18: a list of this process's ``ansible.module_utils``; leave it as it was
        getattr(warnings, "_global_warnings", []).clear()
    assert rc == 0
    assert "left by the controller" not in json.loads(out).get("warnings", [])
