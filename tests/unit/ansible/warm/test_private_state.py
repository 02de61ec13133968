"""The process-wide state the warm executor resets in every fork is where the zygote expects it.

Every run of the warm executor is a fork of one process that has already run a playbook, so the zygote
resets Ansible's private caches first (``compat.PRIVATE_STATE``): the parsed command line, the vault
secrets context, the extra vars cached on a function, the per-process part of uuids, the local temp dir,
ansible-runner's display callback context. If an ansible-core or ansible-runner release renames or moves
any of them, the reset would silently do nothing and one run's arguments would reach the next; these
tests fail instead and say what moved.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.compat import modules, versions

PYPROJECT = Path(__file__).resolve().parents[4] / "pyproject.toml"


@pytest.fixture
def clean_ansible() -> Iterator[None]:
    """Leave Ansible's process-wide state as we found it: fresh, as the zygote's forks have it."""
    from ansible import constants

    local_tmp = constants.DEFAULT_LOCAL_TMP
    compat.reset_private_state()
    yield
    compat.reset_private_state()
    compat.use_local_tmp(local_tmp)


def parse_playbook_args(playbook: Path, *extra_vars: str) -> None:
    """What ``ansible-playbook`` does with its command line before it runs anything."""
    from ansible.cli.playbook import PlaybookCLI

    args = ["ansible-playbook"]
    for value in extra_vars:
        args += ["-e", value]
    PlaybookCLI([*args, str(playbook)]).parse()


def test_the_installed_ansible_core_is_one_the_warm_executor_supports() -> None:
    compat.check_version()


def test_the_supported_range_is_the_one_pyproject_pins() -> None:
    pin = re.search(r'"ansible-core>=(\d+)\.(\d+),<(\d+)\.(\d+)"', PYPROJECT.read_text(encoding="utf-8"))
    assert pin is not None, "pyproject.toml no longer pins ansible-core as >=X.Y,<X.Y"
    low, high = compat.SUPPORTED
    assert tuple(int(part) for part in pin.groups()) == (*low, *high)


@pytest.mark.parametrize("version", [(2, 17, "2.17.0"), (2, 22, "2.22.0")])
def test_an_unsupported_ansible_core_is_refused_with_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, version: tuple[int, int, str]
) -> None:
    monkeypatch.setattr(versions, "ansible_version", lambda: version)
    monkeypatch.delenv(compat.UNTESTED_ENV, raising=False)
    pattern = rf"ansible-core {re.escape(version[2])} is not supported.*>=2\.18,<2\.22"
    with pytest.raises(compat.UnsupportedAnsible, match=pattern):
        compat.check_version()


def test_a_newer_ansible_core_is_tried_only_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(versions, "ansible_version", lambda: (2, 22, "2.22.0"))
    monkeypatch.setenv(compat.UNTESTED_ENV, "1")
    assert compat.check_version() == "2.22.0"
    monkeypatch.setattr(versions, "ansible_version", lambda: (2, 17, "2.17.0"))
    with pytest.raises(compat.UnsupportedAnsible):  # older ones never: what they lack is known
        compat.check_version()


def test_every_piece_of_private_state_is_where_the_zygote_resets_it() -> None:
    assert compat.private_state_problems(populated=False) == []


def test_a_parsed_command_line_fills_the_state_and_the_reset_empties_it(tmp_path: Path, clean_ansible: None) -> None:
    from ansible import context
    from ansible.parsing.dataloader import DataLoader
    from ansible.utils import vars as ansible_vars
    from ansible.utils.context_objects import GlobalCLIArgs

    playbook = tmp_path / "site.yml"
    playbook.write_text("[]\n", encoding="utf-8")
    parse_playbook_args(playbook, "x=1")
    loader = DataLoader()
    assert ansible_vars.load_extra_vars(loader) == {"x": "1"}
    ansible_vars.load_options_vars("2.x")
    ansible_vars.get_unique_id()
    _vault_initialize()
    loader.load('{"y": 1}')  # 2.18: gives the JSON decoder the loader's vault secrets
    assert compat.private_state_problems(populated=True) == []

    uuid_part = ansible_vars.random_int
    compat.reset_private_state()

    assert vars(GlobalCLIArgs)["_Singleton__instance"] is None
    assert not isinstance(context.CLIARGS, GlobalCLIArgs) and dict(context.CLIARGS) == {}
    assert not hasattr(ansible_vars.load_extra_vars, "extra_vars")
    assert not hasattr(ansible_vars.load_options_vars, "options_vars")
    assert ansible_vars.cur_id == 0 and len(ansible_vars.random_int) == 8 and ansible_vars.random_int != uuid_part
    if _vault_context() is not None:
        assert _vault_context()._current is None
    else:  # 2.18
        from ansible.parsing.ajson import AnsibleJSONDecoder

        assert AnsibleJSONDecoder._vaults == {}
    parse_playbook_args(playbook, "x=2")  # the next run's own command line now wins
    assert ansible_vars.load_extra_vars(loader) == {"x": "2"}


def test_without_the_reset_the_second_command_line_is_ignored(tmp_path: Path, clean_ansible: None) -> None:
    """Why the reset exists (and a guard against the test above passing for the wrong reason)."""
    from ansible import context

    playbook = tmp_path / "site.yml"
    playbook.write_text("[]\n", encoding="utf-8")
    parse_playbook_args(playbook, "x=1")
    parse_playbook_args(playbook, "x=2")
    assert context.CLIARGS["extra_vars"] == ("x=1",)


def test_each_run_gets_its_own_local_temp_dir(tmp_path: Path, clean_ansible: None) -> None:
    from ansible import constants

    compat.use_local_tmp(str(tmp_path))
    assert str(tmp_path) == constants.DEFAULT_LOCAL_TMP


@pytest.mark.parametrize("noted", [False, True])
def test_the_display_callback_context_is_renewed_from_the_runs_environment(tmp_path: Path, noted: bool) -> None:
    """ansible-runner's awx_display reads where to write job events when it is imported (in the zygote's
    warm-up): a fork must point it at its own artifact dir, and its events' data go to one stream there.
    The same whether the zygote noted the callback's copies ahead (``note_event_callbacks``, as it does after
    its warm-up) or each run finds them. In a subprocess: importing the callback patches Ansible's Display
    class for the whole process."""
    script = textwrap.dedent(
        """
        import importlib.util, os, sys
        from ansible_runner.utils import get_callback_dir
        from hybrid_operator.ansible import compat
        os.environ["AWX_ISOLATED_DATA_DIR"] = sys.argv[1]
        path = os.path.join(get_callback_dir(), "awx_display.py")
        spec = importlib.util.spec_from_file_location("ansible.plugins.callback.awx_display", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        module.event_context.add_global(playbook="warm-up.yml")
        if sys.argv[3] == "noted":
            compat.note_event_callbacks()
        os.environ["AWX_ISOLATED_DATA_DIR"] = sys.argv[2]
        os.makedirs(os.path.join(sys.argv[2], "job_events"))
        print(compat.fresh_event_contexts())
        print(module.event_context.cache.private_data_dir)
        print(module.event_context.get_global())
        print(compat.stream_event_partials(), type(module.event_context.cache).__name__)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "warm-up"), str(tmp_path / "run"), str(noted and "noted")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["1", str(tmp_path / "run"), "{}", "True _PartialStream"]


def _vault_context() -> type | None:
    from ansible.parsing import vault

    return getattr(vault, "VaultSecretsContext", None)


def _vault_initialize() -> None:
    context = _vault_context()
    if context is not None:  # ansible-core >= 2.19
        context.initialize(context(secrets=[]))


def test_the_module_hooks_fit_the_installed_ansible_core() -> None:
    assert compat.module_hook_problems() == []


def test_a_hook_target_with_other_parameters_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a release that changes ``_low_level_execute_command`` again looks like: no hooks, the usual path."""
    from ansible.plugins.action import ActionBase

    def moved(self: object, cmd: str, sudoable: bool = True, in_data: bytes | None = None, *, stream: bool) -> None: ...

    monkeypatch.setattr(ActionBase, "_low_level_execute_command", moved)
    (problem,) = compat.module_hook_problems()
    assert "_low_level_execute_command" in problem and "stream" in problem


def test_the_expected_shape_is_the_one_of_the_newest_minor_at_or_below_the_installed_one() -> None:
    table = {(2, 18): ("a",), (2, 21): ("a", "b")}
    for version, expected in (((2, 18), ("a",)), ((2, 20), ("a",)), ((2, 21), ("a", "b")), ((2, 22), ("a", "b"))):
        assert versions.per_minor(table, version) == expected
    assert versions.per_minor(table, (2, 17)) == ("a",)  # never reached: the version gate refuses 2.17 first


def test_the_tables_start_at_the_oldest_supported_minor() -> None:
    """A per-minor table without an entry for the oldest supported minor would give it a newer minor's shape."""
    from hybrid_operator.ansible.compat import names

    for table in (
        modules._MODULE_FQN,
        modules._LOW_LEVEL_PARAMS,
        modules._MODULE_PRELOAD,
        modules._CONTROLLER_MODE,
        names._TEMPLATE_KEYWORDS,
        names._DECODER_KEYS,
    ):
        assert min(table) == compat.SUPPORTED[0]


def test_ansible_runner_is_the_shape_the_warm_executor_reads() -> None:
    assert compat.runner_problems() == []
