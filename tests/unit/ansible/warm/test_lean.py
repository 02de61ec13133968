"""The lean path's pieces (``warm.lean``, ``compat.apimodules``): a module run in this process as its wrapper
would run it in a new one, and the process as it was afterwards; the run's report.

``tests/integration/test_lean.py`` and ``test_lean_shapes.py`` compare whole runs on both paths.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.compat import apimodules
from hybrid_operator.ansible.warm import lean

pytestmark = pytest.mark.skipif(
    compat.ansible_version()[:2] < (2, 19), reason="modules run in the run's process from ansible-core 2.19"
)


def wrapper(fqn: str, args: dict[str, object], **extra: object) -> bytes:
    """The tail of an AnsiballZ wrapper as ansible-core writes it (``module_common``)."""
    call = {
        "ansible_module": fqn.rpartition(".")[2],
        "module_fqn": fqn,
        "params": json.dumps({"ANSIBLE_MODULE_ARGS": args}),
        "profile": "legacy",
        "date_time": 0,
        "rlimit_nofile": 0,
        "extensions": {},
        "zip_data": "UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA==",
        **extra,
    }
    lines = "\n".join(f"{key}={value!r}," for key, value in call.items())
    return f'# the wrapper\n\n\nif __name__ == "__main__":\n    _ansiballz_main(\n{lines}\n)\n'.encode()


def test_the_wrapper_shape_is_the_one_this_ansible_writes() -> None:
    assert compat.in_process_problems() == []


def test_the_call_is_read_back_as_ansible_wrote_it() -> None:
    call = compat.wrapper_call(wrapper("ansible.modules.ping", {"data": "it's {{ x }}\n"}))
    assert call is not None
    assert (call.module_fqn, call.profile) == ("ansible.modules.ping", "legacy")
    assert json.loads(call.params) == {"ANSIBLE_MODULE_ARGS": {"data": "it's {{ x }}\n"}}


@pytest.mark.parametrize("extra", [{"extensions": {"coverage": {}}}, {"rlimit_nofile": 1024}])
def test_a_wrapper_with_extensions_or_limits_is_not_run_here(extra: dict[str, object]) -> None:
    assert compat.wrapper_call(wrapper("ansible.modules.ping", {}, **extra)) is None


def test_something_else_is_not_a_call() -> None:
    assert compat.wrapper_call(b"#!/bin/sh\necho hi\n") is None
    tampered = wrapper("ansible.modules.ping", {}).replace(b"params=", b"params=__import__('os').system('x') or ")
    assert compat.wrapper_call(tampered) is None  # read as literals, never evaluated


def _state() -> tuple[object, ...]:
    from ansible.module_utils import _internal, basic
    from ansible.module_utils._internal import _traceback
    from ansible.module_utils.common import warnings

    return (
        _internal.is_controller,
        _traceback._is_traceback_enabled,
        basic._ANSIBLE_ARGS,
        dict(warnings._global_warnings),
        dict(os.environ),
        os.getcwd(),
        sys.stdout,
        sys.stderr,
        list(sys.path),
        sys.argv,
    )


def test_a_module_runs_here_and_leaves_the_process_as_it_was(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    before = _state()
    call = compat.wrapper_call(wrapper("ansible.modules.ping", {"data": "hello"}))
    assert call is not None
    rc, out, err = compat.run_here(call, {"LEAN_TEST_ENV": "task"}, str(tmp_path))
    assert (rc, json.loads(out)["ping"], err) == (0, "hello", b"")
    assert _state() == before
    assert capfd.readouterr() == ("", "")  # nothing reached this process's own descriptors


def test_a_failing_module_fails_as_its_wrapper_reports_it() -> None:
    call = compat.wrapper_call(wrapper("ansible.modules.ping", {"data": "crash"}))
    assert call is not None
    rc, out, _err = compat.run_here(call, {}, None)
    assert rc == 1 and json.loads(out)["failed"] is True


def test_the_tasks_environment_and_directory_are_the_modules(tmp_path: Path) -> None:
    """What the module sees, through a module of this test's own (``lean_probe``)."""
    module = tmp_path / "lean_probe.py"
    module.write_text(
        "import json, os, sys\n"
        "from ansible.module_utils.basic import AnsibleModule\n"
        "m = AnsibleModule(argument_spec={})\n"
        "os.write(1, b'')\n"
        "print('to stderr', file=sys.stderr)\n"
        "m.warn('careful')\n"
        "m.exit_json(env=os.environ.get('LEAN_TEST_ENV'), cwd=os.getcwd())\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        call = compat.wrapper_call(wrapper("lean_probe", {}))
        assert call is not None
        rc, out, err = compat.run_here(call, {"LEAN_TEST_ENV": "task"}, str(tmp_path))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lean_probe", None)
    result = json.loads(out)
    assert rc == 0 and (result["env"], result["cwd"]) == ("task", str(tmp_path))
    assert [w["event"]["msg"] for w in result["warnings"]] == ["careful"] and err == b"to stderr\n"
    assert "LEAN_TEST_ENV" not in os.environ


def test_only_api_modules_run_here() -> None:
    lean._installed.append(True)
    try:
        assert lean.in_process("ansible.modules.ping", wrapper("ansible.modules.ping", {}), {}, None) is None
        fqn = "ansible_collections.kubernetes.core.plugins.modules.k8s_info"
        assert fqn in lean.API_MODULES
        other = wrapper("ansible.modules.ping", {})  # a wrapper that runs another module than it is named for
        assert lean.in_process(fqn, other, {}, None) is None
    finally:
        lean._installed.clear()


@pytest.mark.parametrize(
    ("counts", "path"),
    [
        ({"lean tasks": 3}, "lean"),
        ({}, "lean"),
        ({"lean tasks": 3, "engine tasks": 1}, "mixed"),
        ({"engine tasks": 2}, "engine"),
    ],
)
def test_a_runs_report_names_its_path(tmp_path: Path, counts: dict[str, int], path: str) -> None:
    raw = tmp_path / "stdout.raw"
    lean._installed.append(True)
    lean.COUNTS.update(counts)
    try:
        lean.report(str(raw))
    finally:
        lean._installed.clear()
        lean.COUNTS.clear()
    assert lean.read_report(raw) == (path, False)
    assert lean.read_report(raw) == ("", False) and not list(tmp_path.iterdir())  # read once, then gone


def test_switched_off_it_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(lean.DISABLE_ENV, "0")
    assert lean.install() == [f"{lean.DISABLE_ENV}=0"] and not lean.installed()


def test_module_side_state_is_what_a_new_interpreter_has() -> None:
    """What ``run_here`` resets before a module is everything ``module_utils`` keeps per process."""
    assert apimodules.in_process_problems() == []


@pytest.mark.skipif(compat.ansible_version()[:2] != (2, 21), reason="the lean task steps are 2.21's")
def test_the_task_steps_are_where_the_lean_path_expects_them() -> None:
    from hybrid_operator.ansible.compat import lean as lean_steps

    assert lean_steps.shape_problems() == []


@pytest.mark.skipif(compat.ansible_version()[:2] != (2, 21), reason="the lean task steps are 2.21's")
def test_a_parent_whose_validation_templates_nothing_is_plain() -> None:
    """What lets later tasks share a parent unvalidated: nothing of it is a template."""
    from ansible._internal._datatag._tags import TrustedAsTemplate  # as a role's file gives its strings
    from ansible.playbook.block import Block

    from hybrid_operator.ansible.compat import lean as lean_steps

    trusted = TrustedAsTemplate().tag
    task = {"debug": {"msg": trusted("{{ x }}")}}
    assert lean_steps._plain_object(Block.load({"block": [task], "name": trusted("plain")}))
    assert not lean_steps._plain_object(Block.load({"block": [], "name": trusted("{{ templated }}")}))


@pytest.fixture
def resolutions(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[Any, Any], Callable[..., object]]:
    """The lean path's plugin resolution memo installed in this process for one test, then taken out: the
    memo, and Ansible's own resolution."""
    from ansible.plugins.loader import PluginLoader
    from ansible.utils.display import Display

    from hybrid_operator.ansible.compat import lean as lean_steps

    ansible_resolution = PluginLoader.find_plugin_with_context
    monkeypatch.setattr(PluginLoader, "find_plugin_with_context", ansible_resolution)
    for name in ("display", "verbose"):  # counted by the hook: put back after the test
        monkeypatch.setattr(Display, name, getattr(Display, name))
    monkeypatch.setattr(lean_steps, "_resolutions", {})
    lean_steps._hook_plugin_resolution()
    return lean_steps._resolutions, ansible_resolution


def _outcome(context: object) -> tuple[object, ...]:
    names = ("resolved", "plugin_resolved_path", "plugin_resolved_name", "resolved_fqcn", "redirect_list")
    return tuple(getattr(context, name) for name in names)


@pytest.mark.skipif(compat.ansible_version()[:2] != (2, 21), reason="the lean task steps are 2.21's")
def test_a_plugin_resolved_again_is_what_ansible_resolves(
    resolutions: tuple[dict[Any, Any], Callable[..., object]], tmp_path: Path
) -> None:
    """The memo hands out what Ansible's own resolution gives, a copy each time; a directory added to the
    loader (a role's ``action_plugins``) is searched again, so a plugin there shadows the one remembered."""
    from ansible.plugins.loader import action_loader

    memo, original = resolutions
    first = action_loader.find_plugin_with_context("debug")
    assert len(memo) == 1
    again = action_loader.find_plugin_with_context("debug")
    assert _outcome(again) == _outcome(first) == _outcome(original(action_loader, "debug"))
    again.redirect_list.append("changed by a caller")
    assert _outcome(action_loader.find_plugin_with_context("debug")) == _outcome(first)

    roles_plugins = tmp_path / "action_plugins"
    roles_plugins.mkdir()
    (roles_plugins / "debug.py").write_text("from ansible.plugins.action import ActionBase as ActionModule\n")
    action_loader.add_directory(str(roles_plugins))
    try:
        shadowed = action_loader.find_plugin_with_context("debug")
        assert shadowed.plugin_resolved_path == str(roles_plugins / "debug.py")
        assert _outcome(shadowed) == _outcome(original(action_loader, "debug"))
    finally:
        action_loader._extra_dirs.remove(str(roles_plugins))
        action_loader._clear_caches()


@pytest.mark.skipif(compat.ansible_version()[:2] != (2, 21), reason="the lean task steps are 2.21's")
def test_a_plugin_not_found_or_deprecated_is_resolved_every_time(
    resolutions: tuple[dict[Any, Any], Callable[..., object]],
) -> None:
    from ansible.plugins.loader import action_loader

    from hybrid_operator.ansible.compat import lean as lean_steps

    assert not action_loader.find_plugin_with_context("no_such_action_anywhere").resolved
    assert resolutions[0] == {}
    deprecated = action_loader.find_plugin_with_context("debug")
    deprecated.deprecated = True
    assert not lean_steps._reusable(deprecated)


@pytest.mark.skipif(compat.ansible_version()[:2] != (2, 21), reason="the lean task steps are 2.21's")
def test_a_resolution_that_says_something_is_resolved_and_said_every_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A collection's routing redirect says ``redirecting (type: action) ...`` at ``-vv`` each time Ansible
    resolves the name: remembered, later resolutions would say nothing (seen at -vv in a Foo run, whose
    ``operator_sdk.util.requeue_after`` is routed to ``hybrid_operator.util``)."""
    from ansible.plugins.loader import PluginLoader, action_loader
    from ansible.utils.display import Display

    from hybrid_operator.ansible.compat import lean as lean_steps

    ansible_resolution = PluginLoader.find_plugin_with_context

    def redirected(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        Display().vv(f"redirecting (type: action) {name} to ansible.builtin.debug")
        return ansible_resolution(self, "debug", *args, **kwargs)

    monkeypatch.setattr(PluginLoader, "find_plugin_with_context", redirected)
    for name in ("display", "verbose"):
        monkeypatch.setattr(Display, name, getattr(Display, name))
    monkeypatch.setattr(Display(), "verbosity", 2)
    monkeypatch.setattr(lean_steps, "_resolutions", {})
    lean_steps._hook_plugin_resolution()
    for _ in range(3):
        assert action_loader.find_plugin_with_context("old.collection.debug").resolved
    assert lean_steps._resolutions == {}
    shown = capsys.readouterr()
    assert (shown.out + shown.err).count("redirecting (type: action) old.collection.debug") == 3
