"""Playbooks loaded once, in the zygote, for every run (``warm.plays``): ``Playbook.load`` answered with a tree of
plays, roles, blocks and tasks the zygote built, while nothing the load depended on has changed.

Every run is a fresh fork of the zygote, so a playbook loaded in the zygote is every run's own copy: what a
run does to it (roles marked as run, attributes templated) stays in that run. What ties a loaded tree to one
run is its loader and variable manager; the zygote notes which objects hold the ones it loaded with
(``gc.get_referrers``: attributes or mapping entries, nothing else) and a run puts its own there.

A load is kept only when its outcome cannot depend on the run, which the zygote records while it loads:

- every question it asked the file system (``exists``, ``isdir``, ``isfile``, ``islink``, ``listdir``,
  ``stat``, ``realpath``, and ``expanduser``/``expandvars``, which read the environment) and every file it
  read (by ``stat``: device, inode, size, times, mode) must get the same answer in the run, asked again
  there (a role found elsewhere, a file edited, replaced or added);
- no value it templated held a template (a role name or an imported file named by a variable: the run's
  variables could name another), no ``import_playbook`` (its ``when`` is evaluated at load), no relative
  path resolved against the working directory (each run has its own: while the zygote loads, ``getcwd``
  answers a directory that cannot exist, and a question about a path under it keeps the playbook out);
- it showed nothing (a warning, a deprecation); a message at a verbosity (``statically imported: ...`` at
  ``-vv``, operator-sdk's default) is recorded, not shown, and each run that takes the load says it again
  at the same point through its own ``Display`` (``adopt``); a run with other ``--tags``/``--skip-tags``
  than the zygote's loads for itself (a play reads them when it is built);
- it added no plugin directory (a role with ``library/`` or ``action_plugins/``): the load is stopped
  there, before the plugin loaders change, and that playbook is loaded by each run as before.

Anything else (a vault-encrypted file, a syntax error, a missing role) fails the zygote's load and leaves
the playbook to the runs, which report it as they always did. A run takes the kept tree once (a second load
of the same file in that run is Ansible's own). Shapes are those of ansible-core 2.21 (the lean path's
minor): ``preload_problems`` checks them first.
"""

from __future__ import annotations

import gc
import inspect
import os
import secrets
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hybrid_operator.ansible.compat.versions import ansible_version

MIN_VERSION = (2, 21)
# The file-system questions a load may ask, each patched on ``os``/``os.path`` while the zygote loads.
_PROBED = ("exists", "isdir", "isfile", "islink", "realpath", "expanduser", "expandvars")
_PROBED_OS = ("listdir", "stat")


class _Stop(BaseException):
    """Raised inside a load that must not go on (it would change the zygote's plugin loaders): a
    ``BaseException`` so that no ``except Exception`` in Ansible's loading turns it into something else."""


@dataclass
class Preloaded:
    """One playbook the zygote loaded, with what its load depended on."""

    path: str
    playbook: Any
    loader: Any
    variable_manager: Any
    probes: list[tuple[str, str, Any]]
    holders: list[tuple[Any, str]]  # (object or mapping, name): where the loader or variable manager sits
    tags: tuple[frozenset[str], frozenset[str]]
    messages: list[tuple[Any, Any, int]]  # what the load said at a verbosity (msg, host, caplevel): said again
    taken: bool = False


@dataclass
class _Record:
    probes: list[tuple[str, str, Any]] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    messages: list[tuple[Any, Any, int]] = field(default_factory=list)
    depth: int = 0
    # What ``os.getcwd`` answers while the zygote loads: a directory that cannot exist, so that a path
    # resolved against the working directory (each run has its own) shows in the questions asked.
    cwd: str = field(default_factory=lambda: f"/nonexistent-working-directory-{secrets.token_hex(8)}")


def preload_problems() -> list[str]:
    """Why playbooks cannot be loaded ahead on this ansible-core (empty: they can)."""
    major, minor, _full = ansible_version()
    if (major, minor) < MIN_VERSION:
        return [f"ansible-core {major}.{minor}: its loading was not read for this (2.21 and later)"]
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook import Playbook, PlaybookInclude
    from ansible.plugins.loader import PluginLoader
    from ansible.utils.display import Display

    problems = []
    load = inspect.getattr_static(Playbook, "load", None)
    if not isinstance(load, staticmethod) or list(inspect.signature(load.__func__).parameters) != [
        "file_name", "variable_manager", "loader"
    ]:  # fmt: skip
        problems.append("Playbook.load(file_name, variable_manager, loader)")
    if not isinstance(getattr(DataLoader(), "_FILE_CACHE", None), dict):
        problems.append("DataLoader._FILE_CACHE")
    if list(inspect.signature(DataLoader._get_file_contents).parameters) != ["self", "file_name"]:
        problems.append("DataLoader._get_file_contents(file_name)")
    for owner, names in ((Display, ("display", "verbose")), (PluginLoader, ("add_directory",))):
        problems += [f"{owner.__name__}.{n}" for n in names if not callable(getattr(owner, n, None))]
    if not callable(getattr(PlaybookInclude, "load", None)):
        problems.append("PlaybookInclude.load")
    from ansible._internal._templating._engine import TemplateEngine

    if not all(callable(getattr(TemplateEngine, n, None)) for n in ("template", "is_template")):
        problems.append("TemplateEngine.template, is_template")
    return problems


def preload(path: str) -> Preloaded | str:
    """Load the playbook at ``path`` (absolute) as a run would, recording what the load depended on; the
    loaded playbook, or why it is left to the runs."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook import Playbook
    from ansible.vars.manager import VariableManager

    if not os.path.isabs(path):
        return "not an absolute path"
    loader = DataLoader()
    variable_manager = VariableManager(loader=loader)
    record = _Record()
    try:
        with _recording(record):
            playbook = Playbook.load(path, variable_manager=variable_manager, loader=loader)
    except _Stop:
        return record.refusals[0]
    except Exception as exc:  # left to the runs, which report it as they always did
        return f"{type(exc).__name__} while loading"
    if any(record.cwd in asked for _kind, asked, _answer in record.probes):
        record.refusals.append("it resolves a path against the working directory")
    if record.refusals:
        return record.refusals[0]
    holders = _holders(loader, variable_manager)
    if isinstance(holders, str):
        return holders
    probes = list(dict.fromkeys(record.probes))  # a question asked twice was answered the same
    return Preloaded(path, playbook, loader, variable_manager, probes, holders, _tags(), record.messages)


def hook_preloaded(entries: dict[str, Preloaded], on_take: Callable[[str], None] | None = None) -> None:
    """Have ``Playbook.load`` answer from ``entries`` (by the path it is given) where ``reusable`` says so."""
    from ansible.playbook import Playbook

    original = Playbook.load

    def load(file_name: Any, variable_manager: Any = None, loader: Any = None) -> Any:
        entry = entries.get(file_name) if isinstance(file_name, str) else None
        if entry is not None and loader is not None and variable_manager is not None and reusable(entry):
            if on_take is not None:
                on_take(file_name)
            return adopt(entry, loader, variable_manager)
        return original(file_name, variable_manager=variable_manager, loader=loader)

    Playbook.load = staticmethod(load)


def reusable(entry: Preloaded) -> bool:
    """Whether this run may take ``entry``: not taken yet in it, the same tags, and every file-system
    question answered as it was."""
    if entry.taken or _tags() != entry.tags:
        return False
    return all(_ask(kind, path) == answer for kind, path, answer in entry.probes)


def adopt(entry: Preloaded, loader: Any, variable_manager: Any) -> Any:
    """Give the run ``entry``'s playbook with the run's loader and variable manager in place of the zygote's,
    and its loader the files the load read, as a load of its own would have left them; what the load said
    at a verbosity is said now, through the run's ``Display`` (shown, logged and made an event as the run's
    verbosity and callback decide, as it would have been)."""
    from ansible.utils.display import Display

    entry.taken = True
    display = Display()
    for msg, host, caplevel in entry.messages:
        display.verbose(msg, host=host, caplevel=caplevel)
    for holder, name in entry.holders:
        value = holder[name] if isinstance(holder, dict) else getattr(holder, name)
        new = loader if value is entry.loader else variable_manager
        if isinstance(holder, dict):
            holder[name] = new
        else:
            setattr(holder, name, new)
    for key, value in entry.loader._FILE_CACHE.items():
        loader._FILE_CACHE.setdefault(key, value)
    return entry.playbook


def _tags() -> tuple[frozenset[str], frozenset[str]]:
    """This process's ``--tags`` and ``--skip-tags``, which a play reads when it is built."""
    from ansible import context

    return frozenset(context.CLIARGS.get("tags", ())), frozenset(context.CLIARGS.get("skip_tags", ()))


def _holders(loader: Any, variable_manager: Any) -> list[tuple[Any, str]] | str:
    """Where the loaded tree keeps ``loader`` and ``variable_manager``: attributes of objects or entries of
    mappings (never the variable manager's own, which is dropped); why not, when something else holds one."""
    own = {id(variable_manager), id(vars(variable_manager))}
    of_loader = _holders_of(loader, own)
    if isinstance(of_loader, str):
        return of_loader
    of_manager = _holders_of(variable_manager, own)
    return of_manager if isinstance(of_manager, str) else of_loader + of_manager


def _holders_of(target: Any, own: set[int]) -> list[tuple[Any, str]] | str:
    found: list[tuple[Any, str]] = []
    for referrer in gc.get_referrers(target):
        if isinstance(referrer, types.FrameType) or id(referrer) in own:
            continue
        names = _names_of(referrer, target)
        if not names:
            return f"its {type(target).__name__} is held by a {type(referrer).__name__}"
        found += [(referrer, name) for name in names]
    return found


def _names_of(holder: Any, target: Any) -> list[str]:
    if isinstance(holder, dict):
        return [k for k, v in holder.items() if v is target and isinstance(k, str)]
    attrs = getattr(holder, "__dict__", None)
    return [k for k, v in attrs.items() if v is target] if isinstance(attrs, dict) else []


def _ask(kind: str, path: str) -> Any:
    return _answer(kind, getattr(os if kind in _PROBED_OS else os.path, kind), (path,))


def _answer(kind: str, call: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    try:
        result = call(*args)
    except OSError as exc:
        return f"{type(exc).__name__}:{exc.errno}"
    if kind == "stat":
        return (result.st_dev, result.st_ino, result.st_size, result.st_mtime_ns, result.st_ctime_ns, result.st_mode)
    if kind == "listdir":
        return tuple(sorted(os.fsdecode(n) for n in result))
    return os.fsdecode(result) if isinstance(result, bytes) else result


@contextmanager
def _recording(record: _Record) -> Iterator[None]:
    """Patch what a load may ask or do so that ``record`` notes it; everything put back after."""
    from ansible._internal._templating._engine import TemplateEngine
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook import PlaybookInclude
    from ansible.plugins.loader import PluginLoader
    from ansible.utils.display import Display

    hooks = _Hooks(record)
    patches: list[tuple[Any, str, Callable[[Any], Any]]] = [
        *[(os.path, name, hooks.probe(name)) for name in _PROBED],
        *[(os, name, hooks.probe(name)) for name in _PROBED_OS],
        (os, "getcwd", hooks.cwd),
        (DataLoader, "_get_file_contents", hooks.read),
        (TemplateEngine, "template", hooks.template),
        (Display, "display", hooks.said),
        (Display, "verbose", hooks.verbose),
        (PluginLoader, "add_directory", hooks.stop("it adds a plugin directory (a role's library or plugins)")),
        (PlaybookInclude, "load", hooks.stop("it imports a playbook")),
    ]
    saved: list[tuple[Any, str, Any]] = []
    try:
        for owner, name, make in patches:
            saved.append((owner, name, inspect.getattr_static(owner, name)))
            setattr(owner, name, make(getattr(owner, name)))
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


class _Hooks:
    """The replacements ``_recording`` installs, each a function of the original it wraps."""

    def __init__(self, record: _Record) -> None:
        self.record = record

    def probe(self, kind: str) -> Callable[[Any], Any]:
        record = self.record

        def make(original: Any) -> Any:
            def asked(path: Any, *args: Any, **kwargs: Any) -> Any:
                if record.depth:
                    return original(path, *args, **kwargs)
                if args or kwargs or not isinstance(path, str | bytes):
                    record.refusals.append(f"it called {kind} in a way not recorded")
                    return original(path, *args, **kwargs)
                record.depth += 1
                try:
                    record.probes.append((kind, os.fsdecode(path), _answer(kind, original, (path,))))
                    return original(path)
                finally:
                    record.depth -= 1

            return asked

        return make

    def read(self, original: Any) -> Any:
        record = self.record

        def get_file_contents(loader: Any, file_name: Any) -> Any:
            if not record.depth:  # a file read past the parsed-file cache: its identity is a question too
                record.depth += 1
                try:
                    path = loader.path_dwim(file_name)
                    record.probes.append(("stat", path, _answer("stat", os.stat, (path,))))
                finally:
                    record.depth -= 1
            return original(loader, file_name)

        return get_file_contents

    def cwd(self, original: Any) -> Any:
        record = self.record

        def getcwd() -> str:
            return record.cwd

        return getcwd

    def template(self, original: Any) -> Any:
        record = self.record

        def templated(engine: Any, variable: Any, *args: Any, **kwargs: Any) -> Any:
            if not record.depth:
                record.depth += 1
                try:
                    if engine.is_template(variable):
                        record.refusals.append("a value it templates at load holds a template")
                finally:
                    record.depth -= 1
            return original(engine, variable, *args, **kwargs)

        return templated

    def said(self, original: Any) -> Any:
        record = self.record

        def display(shown: Any, msg: Any, *args: Any, **kwargs: Any) -> Any:
            record.refusals.append("loading it shows a message")
            return original(shown, msg, *args, **kwargs)

        return display

    def verbose(self, original: Any) -> Any:
        record = self.record

        def message(_shown: Any, msg: Any, host: Any = None, caplevel: int = 2) -> None:
            record.messages.append((msg, host, caplevel))  # said by each run that takes the load, not here

        return message

    def stop(self, reason: str) -> Callable[[Any], Any]:
        record = self.record

        def make(_original: Any) -> Any:
            def stopped(*_args: Any, **_kwargs: Any) -> Any:
                record.refusals.append(reason)
                raise _Stop(reason)

            return stopped

        return make
