"""Two hooks on the official ``kubernetes`` client that API modules call in a run: the same answers, less work.

Where it sits: a leaf of ``kube`` (the package that owns the client library; this module imports nothing of
the operator and talks to no API server). The warm executor's zygote (``ansible.warm.smallhooks``) calls
``install`` once, after ``inworker.preload`` has imported the client, so every run it forks (and every
module those runs call, in process or in a fork) inherits them. Both are exact: what the client returns,
raises and writes is what it did before, only computed once or when it is read:

- **a kubeconfig parsed once per content.** ``kubernetes.core`` builds a client configuration for every
  module call, and the client parses the kubeconfig file for it with PyYAML's pure-Python ``safe_load``
  (``KubeConfigMerger.load_config``): ~2 % of a Foo run's CPU for three API calls. The parse of one text
  is remembered in the process (a run's own fork) and a deep copy handed out, so each caller still owns
  what it gets; another text is parsed again, and a text that does not parse is given to ``safe_load``
  unchanged (the same error). Only the first file of a run is parsed: runs differ in their kubeconfigs.
- **a 404's traceback formatted when it is read.** The dynamic client turns every ``ApiException`` into
  its own error and formats the traceback into it at once (``traceback.format_tb``: source lines and caret
  positions for each frame; ~2.5 % of a Foo's first run, whose ``k8s_info`` and ``k8s`` find nothing yet).
  Nearly every such error is caught and dropped by ``kubernetes.core`` (a missing object is an answer).
  The traceback object is kept with the error and formatted the first time ``original_traceback`` (or
  ``str``) is read: the frames, line numbers and source files are those of the moment it was raised.

``KUBE_CLIENT_HOOKS_ENV=0`` turns both off. ``install`` says why it could not (a client of another shape).
"""

from __future__ import annotations

import copy
import importlib
import inspect
import sys
import traceback
from types import TracebackType
from typing import Any

KUBE_CLIENT_HOOKS_ENV = "HYBRID_OPERATOR_KUBE_CLIENT_HOOKS"  # "0": the client parses and formats as it does
_MEMO_LIMIT = 8  # distinct kubeconfig texts remembered by one process (a run has one, maybe two)
_MEMO_TEXT_LIMIT = 1 << 20  # a larger text is parsed every time
_installed: list[str] = []
# ``kubernetes.dynamic.exceptions.api_exception``'s table: the error class for each status (others: its base).
_ERRORS = (
    (400, "BadRequestError"),
    (401, "UnauthorizedError"),
    (403, "ForbiddenError"),
    (404, "NotFoundError"),
    (405, "MethodNotAllowedError"),
    (409, "ConflictError"),
    (410, "GoneError"),
    (422, "UnprocessibleEntityError"),
    (429, "TooManyRequestsError"),
    (500, "InternalServerError"),
    (503, "ServiceUnavailableError"),
    (504, "ServerTimeoutError"),
)


class _MemoYaml:
    """What ``kube_config`` sees as its ``yaml`` module: ``safe_load`` remembered per text, the rest PyYAML's."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._parsed: dict[str, Any] = {}

    def safe_load(self, stream: Any) -> Any:
        if not (hasattr(stream, "read") and hasattr(stream, "seek")):
            return self._real.safe_load(stream)
        start = stream.tell()
        text = stream.read()  # read as PyYAML would: the parse below is the real one, of the real stream
        if isinstance(text, str) and text in self._parsed:
            return copy.deepcopy(self._parsed[text])  # the stream read to its end, as after a parse
        stream.seek(start)
        parsed = self._real.safe_load(stream)  # its errors (which name the file) unchanged
        if isinstance(text, str) and len(text) <= _MEMO_TEXT_LIMIT:
            if len(self._parsed) >= _MEMO_LIMIT:
                self._parsed.clear()
            self._parsed[text] = copy.deepcopy(parsed)
        return parsed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _Deferred:
    """A traceback not formatted yet (what the hooked ``api_exception`` hands the error)."""

    __slots__ = ("tb",)

    def __init__(self, tb: TracebackType | None) -> None:
        self.tb = tb


class _LazyTraceback:
    """``DynamicApiError.original_traceback``: formatted from the kept traceback the first time it is read."""

    _TEXT, _TB = "_hyop_original_traceback_text", "_hyop_original_traceback_tb"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        state = obj.__dict__
        if self._TEXT not in state:
            state[self._TEXT] = "\n".join(traceback.format_tb(state.pop(self._TB, None)))
        return state[self._TEXT]

    def __set__(self, obj: Any, value: Any) -> None:
        state = obj.__dict__
        state.pop(self._TEXT, None)
        state.pop(self._TB, None)
        if isinstance(value, _Deferred):
            state[self._TB] = value.tb
        else:
            state[self._TEXT] = value


def hook_problems() -> list[str]:
    """Why the hooks cannot go into this client (empty: they can)."""
    try:
        kube_config, client, exceptions = _client_modules()
        problems = []
        if "yaml.safe_load(f)" not in inspect.getsource(kube_config.KubeConfigMerger.load_config):
            problems.append("KubeConfigMerger.load_config: does not parse with yaml.safe_load(f)")
        if getattr(client, "api_exception", None) is not exceptions.api_exception:
            problems.append("kubernetes.dynamic.client: does not use exceptions.api_exception")
        source = inspect.getsource(exceptions.api_exception)
        problems += [
            f"api_exception: {code} is not {name}" for code, name in _ERRORS if f"{code}: {name}," not in source
        ]
        if "tb = '\\n'.join(traceback.format_tb(exc_traceback))" not in source or "(e, tb)" not in source:
            problems.append("api_exception: does not format the traceback into the error as expected")
        if "self.original_traceback = tb" not in inspect.getsource(exceptions.DynamicApiError.__init__):
            problems.append("DynamicApiError.__init__: does not keep original_traceback")
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def install() -> list[str]:
    """Install both hooks in this process (see the module docstring); why not, if they could not go in."""
    if _installed:
        return []
    problems = hook_problems()
    if problems:
        return problems
    kube_config, client, exceptions = _client_modules()
    kube_config.yaml = _MemoYaml(kube_config.yaml)
    errors = exceptions.DynamicApiError
    errors.original_traceback = _LazyTraceback()
    by_status = {code: getattr(exceptions, name) for code, name in _ERRORS}

    def api_exception(e: Any) -> Any:
        return by_status.get(e.status, errors)(e, _Deferred(sys.exc_info()[2]))

    api_exception.__doc__ = exceptions.api_exception.__doc__
    exceptions.api_exception = api_exception
    client.api_exception = api_exception  # imported by name there
    _installed.append("kubernetes")
    return []


def _client_modules() -> tuple[Any, Any, Any]:
    """The client's modules the hooks read and change: ``kube_config``, the dynamic ``client``, ``exceptions``."""
    return tuple(
        importlib.import_module(f"kubernetes.{name}")
        for name in ("config.kube_config", "dynamic.client", "dynamic.exceptions")
    )  # type: ignore[return-value]
