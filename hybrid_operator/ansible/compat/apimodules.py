"""Modules run in the run's own process (``warm.lean``): what the AnsiballZ wrapper would do, done here.

A module that runs in a fork (``warm.inworker``) gets a copy of the run's process to change as it likes; one
that runs here gets the run's process itself, so everything it may change is saved before and put back
after, and everything a fresh interpreter would start without is cleared before. What that is was read from
ansible-core 2.19-2.21's wrapper (``ansible/_internal/_ansiballz/_wrapper.py``), its loader
(``ansible/module_utils/_internal/_ansiballz/_loader.py``) and the module-side state of ``module_utils``:

- the wrapper's arguments (``wrapper_call``): one ``name=repr(value),`` line each at its end, read back with
  ``ast.literal_eval`` (never evaluated as code); a wrapper with extensions (coverage, a debugger) or an
  open-files limit is not run here;
- module-side ``module_utils``: ``_internal.is_controller`` false and the module-side traceback switch while
  the module runs (as ``to_module_side`` sets them in a fork), the controller's values after;
- what a fresh interpreter starts without: ``basic._ANSIBLE_ARGS``/``_ANSIBLE_PROFILE``/``_PARSED_MODULE_ARGS``
  (set from the wrapper's arguments), the traceback settings cached from the previous module's arguments, the
  warnings and deprecations collected for the result (``common.warnings``), Python's warning filters and
  the registries that remember a warning was shown;
- what the module may change: ``sys.argv``, ``sys.path``, ``sys.modules['__main__']`` (``runpy`` puts them
  back itself), ``sys.stdout``/``sys.stderr`` and descriptors 1 and 2 (captured, as a pipe would), the
  environment (the task's ``environment:`` on top of the run's, as the shell gives it), the working
  directory and ``tempfile.tempdir``.

What is left, on purpose: the modules' imports and their own caches (``kubernetes.core``'s client pool is
the warm client a module reuses), the locale (``AnsibleModule`` sets it to the environment's, as the
controller already did) and syslog's ident (``AnsibleModule.log``). Only modules ``warm.lean`` lists (code
read for what else they touch) come here.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hybrid_operator.ansible.compat.versions import per_minor

_CALL_MARK = b'\nif __name__ == "__main__":\n    _ansiballz_main(\n'
# The minors whose wrapper ends with the ``_ansiballz_main(name=repr(value), ...)`` call read here (2.18 runs
# ``runpy`` with the arguments inline: no module of 2.18 runs here).
_WRAPPER_CALL = {(2, 18): False, (2, 19): True}
# How ansible-core writes that call (``module_common``), checked in its source before a wrapper is read.
_WRAPPER_SOURCE_MARK = 'if __name__ == "__main__":\n    _ansiballz_main(\n{args_string}\n)'
_ARGS_LINE = "args_string = '\\n'.join(f'{key}={value!r},' for key, value in args.items())"
_NEEDED = ("ansible_module", "module_fqn", "params", "profile", "extensions", "rlimit_nofile")


@dataclass(frozen=True)
class WrapperCall:
    """What the wrapper would pass its loader: the module's name and arguments, serialized as Ansible did."""

    module_fqn: str
    params: bytes
    profile: str


def wrapper_call(wrapper: bytes) -> WrapperCall | None:
    """The module call an AnsiballZ wrapper makes, or None when it is not one this process can make itself
    (another shape, extensions, an open-files limit)."""
    if not per_minor(_WRAPPER_CALL):
        return None
    at = wrapper.rfind(_CALL_MARK)
    if at < 0:
        return None
    found: dict[str, Any] = {}
    for line in wrapper[at + len(_CALL_MARK) :].split(b"\n"):
        name, sep, value = line.partition(b"=")
        key = name.decode("ascii", "replace")
        if sep and key in _NEEDED and value.endswith(b","):
            try:
                found[key] = ast.literal_eval(value[:-1].decode("utf-8"))
            except (ValueError, SyntaxError, UnicodeDecodeError):
                return None
    if set(found) != set(_NEEDED) or found["extensions"] or found["rlimit_nofile"]:
        return None
    if not all(isinstance(found[key], str) for key in ("module_fqn", "params", "profile")):
        return None
    return WrapperCall(found["module_fqn"], found["params"].encode("utf-8"), found["profile"])


def in_process_problems() -> list[str]:
    """Why modules cannot run in this process with this ansible-core (empty: they can)."""
    if not per_minor(_WRAPPER_CALL):
        return ["the wrapper of this ansible-core calls its module another way (2.19 and later only)"]
    try:
        from ansible.module_utils import _internal, basic
        from ansible.module_utils._internal import _traceback
        from ansible.module_utils._internal._ansiballz import _loader
        from ansible.module_utils.common import warnings as module_warnings

        problems = []
        for owner, names in (
            (basic, ("_ANSIBLE_ARGS", "_ANSIBLE_PROFILE", "_PARSED_MODULE_ARGS")),
            (_internal, ("is_controller",)),
            (_traceback, ("_is_traceback_enabled", "_is_module_traceback_enabled")),
            (_traceback, ("_module_tracebacks_enabled_events",)),
            (module_warnings, ("_global_warnings", "_global_deprecations")),
        ):
            problems += [f"{owner.__name__}.{name}: not found" for name in names if not hasattr(owner, name)]
        from ansible.executor import module_common

        source = inspect.getsource(module_common)
        if _WRAPPER_SOURCE_MARK not in source or _ARGS_LINE not in source:
            problems.append("module_common: the wrapper no longer ends with _ansiballz_main(name=repr(value), ...)")
        if not callable(getattr(_loader, "run_module", None)):
            problems.append("ansible.module_utils._internal._ansiballz._loader.run_module: not found")
        elif "init_globals" not in _loader.run_module.__code__.co_varnames:
            problems.append("_loader.run_module: not the expected parameters")
        return problems
    except Exception as exc:
        return [f"{type(exc).__name__}: {exc}"]


def run_here(call: WrapperCall, env: Mapping[str, str], cwd: str | None) -> tuple[int, bytes, bytes]:
    """Run the module of ``call`` in this process as its wrapper would in a new one; (rc, stdout, stderr)
    as the shell would report them. Check ``in_process_problems`` first."""
    from ansible.module_utils._internal._ansiballz import _loader

    rc = 0
    with _captured() as (out, err), _module_side(call), _process_state(env, cwd):
        try:
            _loader.run_module(
                json_params=call.params,
                profile=call.profile,
                module_fqn=call.module_fqn,
                modlib_path=os.path.dirname(call.module_fqn.replace(".", os.sep)),
                extensions={},
            )
        except SystemExit as exc:
            rc = _exit_status(exc)
    return rc, out.getvalue(), err.getvalue()


def _exit_status(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _module_side(call: WrapperCall) -> Iterator[None]:
    """``module_utils`` as a new interpreter running this module has it; the controller's after."""
    from ansible.module_utils import _internal, basic
    from ansible.module_utils._internal import _traceback
    from ansible.module_utils.common import warnings as module_warnings

    saved = (
        _internal.is_controller,
        _traceback._is_traceback_enabled,
        basic._ANSIBLE_ARGS,
        basic._ANSIBLE_PROFILE,
        basic._PARSED_MODULE_ARGS,
        _traceback._module_tracebacks_enabled_events,
    )
    collected = (dict(module_warnings._global_warnings), dict(module_warnings._global_deprecations))
    _internal.is_controller = False
    _traceback._is_traceback_enabled = _traceback._is_module_traceback_enabled
    _traceback._module_tracebacks_enabled_events = None
    basic._PARSED_MODULE_ARGS = None
    module_warnings._global_warnings.clear()
    module_warnings._global_deprecations.clear()
    try:
        yield
    finally:
        (
            _internal.is_controller,
            _traceback._is_traceback_enabled,
            basic._ANSIBLE_ARGS,
            basic._ANSIBLE_PROFILE,
            basic._PARSED_MODULE_ARGS,
            _traceback._module_tracebacks_enabled_events,
        ) = saved
        module_warnings._global_warnings.clear()
        module_warnings._global_warnings.update(collected[0])
        module_warnings._global_deprecations.clear()
        module_warnings._global_deprecations.update(collected[1])


@contextlib.contextmanager
def _process_state(env: Mapping[str, str], cwd: str | None) -> Iterator[None]:
    """The task's environment and directory while the module runs; the run's after. Python's warnings as a
    new interpreter has them (each module shows its warnings, as each fork did)."""
    environ = dict(os.environ)
    home = os.getcwd()
    saved_tempdir = tempfile.tempdir
    with warnings.catch_warnings():  # filters put back after; entering it makes every registry stale
        try:
            os.environ.update(env)
            tempfile.tempdir = None
            if cwd:
                os.chdir(cwd)
            yield
        finally:
            os.chdir(home)
            tempfile.tempdir = saved_tempdir
            if dict(os.environ) != environ:
                os.environ.clear()
                os.environ.update(environ)


@contextlib.contextmanager
def _captured() -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    """The module's standard output and error, Python's streams and descriptors 1 and 2 alike (the run's
    own descriptor 1 is its job-event stream: nothing of a module may reach it)."""
    out, err = io.BytesIO(), io.BytesIO()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved_streams = sys.stdout, sys.stderr
    saved_fds = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as fd_out, tempfile.TemporaryFile() as fd_err:
        os.dup2(fd_out.fileno(), 1)
        os.dup2(fd_err.fileno(), 2)
        sys.stdout = io.TextIOWrapper(_Sink(out), write_through=True)
        sys.stderr = io.TextIOWrapper(_Sink(err), write_through=True)
        try:
            yield out, err
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            sys.stdout, sys.stderr = saved_streams
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            os.close(saved_fds[0])
            os.close(saved_fds[1])
            for handle, sink in ((fd_out, out), (fd_err, err)):  # what went to the descriptors comes after
                handle.seek(0)
                sink.write(handle.read())


class _Sink(io.RawIOBase):
    """A writable raw stream into a ``BytesIO`` (what ``sys.stdout`` of a module writes through)."""

    def __init__(self, target: io.BytesIO) -> None:
        self._target = target

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self._target.write(bytes(data))
