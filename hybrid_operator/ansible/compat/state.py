"""Process-wide state of ansible-core and ansible-runner that the zygote resets in every fork.

Used by ``warm.zygote``: ``PRIVATE_STATE`` lists each private cache with its expected shape per minor;
``reset_private_state`` clears them, ``private_state_problems`` says what moved.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybrid_operator.ansible.compat.versions import SUPPORTED, ansible_version


@dataclass(frozen=True)
class PrivateState:
    """One piece of process-wide state a playbook run leaves behind, and how to find it."""

    name: str
    why: str
    present: Callable[[], bool]  # the attribute exists where we reset it
    populated: Callable[[], bool]  # a run has filled it (true right after the zygote's warm-up)
    since: tuple[int, int] = SUPPORTED[0]
    until: tuple[int, int] | None = None  # the first minor without it


def _global_cli_args() -> Any:
    return __import__("ansible.utils.context_objects").utils.context_objects.GlobalCLIArgs


def _vault_context() -> Any:
    return getattr(__import__("ansible.parsing.vault").parsing.vault, "VaultSecretsContext", None)


def _vars() -> Any:
    return __import__("ansible.utils.vars").utils.vars


def _display() -> Any:
    return __import__("ansible.utils.display").utils.display.Display()


def _decoder_vaults() -> Any:
    """2.18's extra-vars JSON decoder's class-level vault secrets (the last ``from_yaml`` call's), or None."""
    if ansible_version()[:2] >= (2, 19):  # the name is an alias of another decoder there
        return None
    return vars(__import__("ansible.parsing.ajson").parsing.ajson.AnsibleJSONDecoder).get("_vaults")


def _rpc_host() -> Any:
    """ansible-core 2.21's in-process RPC server for its workers (``add_host``, ``group_by``), or None."""
    try:
        from ansible._internal import _rpc_host
    except ImportError:
        return None
    return _rpc_host


def _rpc_host_in_shape() -> bool:
    module = _rpc_host()
    manager = getattr(module, "LocalManager", None)
    return (
        manager is not None
        and "_shared_instance" in vars(manager)
        and isinstance(vars(manager).get("shared_instance"), classmethod)
        and hasattr(getattr(module, "_server_ready", None), "clear")
    )


def _awx_display_modules() -> list[Any]:
    """The loaded copies of ansible-runner's ``awx_display`` callback (its event context is module state)."""
    return [m for m in list(sys.modules.values()) if getattr(m, "__name__", "").endswith("awx_display")]


PRIVATE_STATE = (
    PrivateState(
        "GlobalCLIArgs singleton",
        "holds the parsed command line; a second parse would return the first run's",
        lambda: "_Singleton__instance" in vars(_global_cli_args()),
        lambda: getattr(_global_cli_args(), "_Singleton__instance", None) is not None,
    ),
    PrivateState(
        "ansible.context.CLIARGS",
        "the parsed command line every part of Ansible reads",
        lambda: hasattr(__import__("ansible.context").context, "CLIARGS"),
        lambda: isinstance(__import__("ansible.context").context.CLIARGS, _global_cli_args()),
    ),
    PrivateState(
        "VaultSecretsContext._current",
        "the vault secrets of the run; initialising it twice raises",
        lambda: _vault_context() is not None and "_current" in vars(_vault_context()),
        lambda: getattr(_vault_context(), "_current", None) is not None,
        since=(2, 19),  # 2.18 hands the secrets to each loader: nothing process-wide
    ),
    PrivateState(
        "AnsibleJSONDecoder._vaults",
        "the vault secrets the extra-vars decoder was last given; a fresh process has none",
        lambda: isinstance(_decoder_vaults(), dict),
        lambda: bool(_decoder_vaults()),
        until=(2, 19),  # 2.19 and later keep them in VaultSecretsContext
    ),
    PrivateState(
        "load_extra_vars.extra_vars",
        "a function-attribute cache of the run's extra vars: the next run would get these",
        lambda: callable(getattr(_vars(), "load_extra_vars", None)),
        lambda: hasattr(_vars().load_extra_vars, "extra_vars"),
    ),
    PrivateState(
        "load_options_vars.options_vars",
        "a function-attribute cache of ansible_check_mode, ansible_verbosity and friends",
        lambda: callable(getattr(_vars(), "load_options_vars", None)),
        lambda: hasattr(_vars().load_options_vars, "options_vars"),
    ),
    PrivateState(
        "ansible.utils.vars.random_int / cur_id",
        "the per-process part of task and play uuids; forks would all share the zygote's",
        lambda: (
            isinstance(getattr(_vars(), "random_int", None), str)
            and isinstance(_vars().cur_id, int)
            and isinstance(getattr(_vars(), "_MAXSIZE", None), int)
        ),
        lambda: _vars().cur_id > 0,
    ),
    PrivateState(
        "Display de-duplication sets",
        "warnings and deprecations already shown once are not shown again",
        lambda: all(hasattr(getattr(_display(), n, None), "clear") for n in ("_warns", "_deprecations", "_errors")),
        lambda: True,
    ),
    PrivateState(
        "ansible.constants.DEFAULT_LOCAL_TMP",
        "the process's local temp dir (AnsiballZ cache, rendered templates): one per run, as a new process",
        lambda: isinstance(getattr(__import__("ansible.constants").constants, "DEFAULT_LOCAL_TMP", None), str),
        lambda: True,
    ),
    PrivateState(
        "ansible._internal._rpc_host.LocalManager._shared_instance",
        "the RPC server (two threads) a run's workers call back into; each fork must start its own",
        _rpc_host_in_shape,
        lambda: True,  # never started in the zygote (``no_rpc_host``): nothing to fill in
        since=(2, 21),
    ),
    PrivateState(
        "ansible-runner awx_display.event_context",
        "the display callback's job-event context, made when it is imported: it points at the warm-up's dir",
        lambda: all(hasattr(m, "EventContext") and hasattr(m, "event_context") for m in _awx_display_modules()),
        lambda: True,  # not loaded in this process: a fork loads it itself, from its own environment
    ),
)


def private_state_problems(populated: bool, version: tuple[int, int] | None = None) -> list[str]:
    """What of ``PRIVATE_STATE`` is not where this module expects it in the installed ansible-core.

    ``populated``: also require that a run has filled it in (the zygote checks this after its warm-up,
    which proves the reset targets are the ones a real run uses).
    """
    if version is None:
        major, minor, _full = ansible_version()
        version = (major, minor)
    problems = []
    for state in PRIVATE_STATE:
        if version < state.since or (state.until is not None and version >= state.until):
            continue
        try:
            if not state.present():
                problems.append(f"{state.name}: not found")
            elif populated and not state.populated():
                problems.append(f"{state.name}: a run did not fill it in")
        except Exception as exc:  # an import or attribute error is the same news: the shape changed
            problems.append(f"{state.name}: {type(exc).__name__}: {exc}")
    return problems


def reset_private_state() -> None:
    """Put Ansible's process-wide state back as a fresh ``ansible-playbook`` process has it."""
    from ansible import context
    from ansible.utils.context_objects import CLIArgs

    type.__setattr__(_global_cli_args(), "_Singleton__instance", None)
    context.CLIARGS = CLIArgs({})
    vault_context = _vault_context()
    if vault_context is not None:
        vault_context._current = None
    decoder_vaults = _decoder_vaults()
    if isinstance(decoder_vaults, dict):
        decoder_vaults.clear()
    ansible_vars = _vars()
    for function, cache in (
        (ansible_vars.load_extra_vars, "extra_vars"),
        (ansible_vars.load_options_vars, "options_vars"),
    ):
        with contextlib.suppress(AttributeError):
            delattr(function, cache)
    ansible_vars.random_int = f"{secrets.randbelow(ansible_vars._MAXSIZE):08x}"[:8]
    ansible_vars.cur_id = 0
    display = _display()
    for name in ("_warns", "_deprecations", "_errors"):
        getattr(display, name).clear()
    rpc_host = _rpc_host()
    if rpc_host is not None and _rpc_host_in_shape():  # the run starts its own server; its workers call that
        rpc_host.LocalManager._shared_instance = None
        rpc_host._server_ready.clear()


@contextlib.contextmanager
def no_rpc_host() -> Iterator[None]:
    """Run a playbook in this process without starting ansible-core's RPC server (2.21 and later: a thread
    pool and an accepter thread, for workers' ``add_host`` and ``group_by``). It cannot be stopped once
    started, and a process with threads must not fork; the warm-up uses neither task. If its shape moved,
    nothing is changed here and the zygote's thread check refuses to serve (the runner path takes over)."""
    rpc_host = _rpc_host()
    if rpc_host is None or not _rpc_host_in_shape():
        yield
        return
    manager = rpc_host.LocalManager
    original = vars(manager)["shared_instance"]
    manager.shared_instance = classmethod(lambda cls: None)
    try:
        yield
    finally:
        manager.shared_instance = original


def use_local_tmp(path: str | None = None) -> str:
    """Give this process its own local temp dir (Ansible makes one per process at import); the one it has."""
    from ansible import constants

    if path is not None:
        constants.DEFAULT_LOCAL_TMP = path
    return str(constants.DEFAULT_LOCAL_TMP)


# Noted once in the zygote (``note_event_callbacks``): its loaded ``awx_display`` copies with an event context,
# and whether their events' data can be streamed. Its forked runs have those very modules.
_noted_callbacks: list[tuple[list[Any], bool]] = []


def note_event_callbacks() -> None:
    """In the zygote, once its warm-up has loaded the display callback: note what every run would otherwise
    find again before it starts (a walk over every loaded module, a read of the callback's source: ~4 ms)."""
    _noted_callbacks[:] = [_find_event_callbacks()]


def _event_callbacks() -> tuple[list[Any], bool]:
    """The ``awx_display`` copies with an event context, and whether their events' data can be streamed."""
    return _noted_callbacks[0] if _noted_callbacks else _find_event_callbacks()


def _find_event_callbacks() -> tuple[list[Any], bool]:
    from hybrid_operator.ansible.compat import events

    modules = [m for m in _awx_display_modules() if hasattr(m, "EventContext")]
    return modules, bool(modules) and not events.partial_stream_problems(modules)


def fresh_event_contexts() -> int:
    """Re-create ansible-runner's ``awx_display`` event context from this process's environment (where to
    write job events is read at import, in the zygote's warm-up). How many callback copies were found."""
    modules, _streamable = _event_callbacks()
    for module in modules:
        module.event_context = module.EventContext()
    return len(modules)


def quiet_debug_calls() -> list[str]:
    """``Display.debug`` without the display callback's marking while debug output is off (``events``);
    why not (empty: done). In the zygote, after its warm-up loaded the callback."""
    from hybrid_operator.ansible.compat import events

    return events.quiet_debug([m for m in _awx_display_modules() if hasattr(m, "EventContext")])


def stream_event_partials() -> bool:
    """Have this run's display callback write its events' data to one stream (``events``) instead of a file
    per event; whether it does (else it writes the files, which the reader still takes)."""
    from hybrid_operator.ansible.compat import events

    modules, streamable = _event_callbacks()
    data_dir = os.environ.get("AWX_ISOLATED_DATA_DIR")
    if not streamable or not data_dir:
        return False
    return events.stream_partials(modules, Path(data_dir) / "job_events")


def run_playbook(argv: list[str]) -> int:
    """Be ``ansible-playbook ARGV`` in this process; its exit code."""
    from ansible.cli.playbook import PlaybookCLI

    sys.argv = list(argv)
    try:
        PlaybookCLI.cli_executor(list(argv))
    except SystemExit as exc:
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    return 0
