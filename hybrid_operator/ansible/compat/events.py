"""Job events' data in one stream per run (``warm.zygote`` writes it, ``compat.runner.replay_output`` reads it).

ansible-runner's display callback (``awx_display``) puts each event's marker in the output and the event's
data in a file of its own, ``job_events/<uuid>-partial.json`` (``IsolatedFileWrite``: an existence check, an
open, a write, a rename), which the reader opens, merges and deletes again: four file operations on each
side per event, ~700 events for a reconcile of ~200 tasks. In a warm run the callback's cache is
``_PartialStream`` instead: one line of JSON per event appended to ``job_events/partials.jsonl`` (one write,
before the marker is written, so a reader that meets the marker finds the line), and ``PartialReader``
reads that file as far as it needs. A run that writes per-event files (a run exec'd as a real
``ansible-playbook``, or an ``awx_display`` of another shape) is read as before. The stream is removed once
read: the artifacts are the ones ansible-runner leaves.

``awx_display`` also wraps every public ``Display`` method so that what it displays is marked with the
method's name (``with_context``: a context manager per call). ``Display.debug`` is called ~40 times per task
and, with Ansible's debug output off (``DEFAULT_DEBUG``, read once from the environment every run shares),
displays nothing: ``quiet_debug`` takes the marking off that one method then (``Display._meets_debug``
returns first), so what is displayed and every event stay the same.
"""

from __future__ import annotations

import inspect
import json
import os
import threading
from pathlib import Path
from typing import Any

PARTIALS = "partials.jsonl"
_KEY_PREFIX = ":1:ev-"


def partial_stream_problems(modules: list[Any]) -> list[str]:
    """Why these loaded ``awx_display`` modules cannot take ``_PartialStream`` (empty: they can)."""
    problems = []
    for module in modules:
        writer = getattr(module, "IsolatedFileWrite", None)
        try:
            source = inspect.getsource(writer.set) if writer is not None else ""
        except (OSError, TypeError):
            source = ""
        if f"key[len('{_KEY_PREFIX}'):]" not in source:
            problems.append(f"{module.__name__}.IsolatedFileWrite.set: not the expected key")
        if not isinstance(getattr(module, "AnsibleJSONEncoderLocal", None), type):
            problems.append(f"{module.__name__}.AnsibleJSONEncoderLocal: not found")
        context = getattr(module, "event_context", None)
        if not isinstance(getattr(context, "cache", None), writer or type(None)):
            problems.append(f"{module.__name__}.event_context.cache: not an IsolatedFileWrite")
    return problems


class _PartialStream:
    """``IsolatedFileWrite`` as one append-only file: ``set`` writes the event's line at once."""

    def __init__(self, path: Path, encoder: type[json.JSONEncoder]) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._encoder = encoder
        self._lock = threading.Lock()

    def set(self, key: str, value: Any) -> None:
        line = json.dumps({"uuid": key[len(_KEY_PREFIX) :], "data": value}, cls=self._encoder) + "\n"
        data = line.encode("utf-8")
        with self._lock:
            while data:
                data = data[os.write(self._fd, data) :]


def stream_partials(modules: list[Any], events_dir: Path) -> bool:
    """Give these ``awx_display`` modules' event contexts a ``_PartialStream`` into ``events_dir``; whether
    they got one (check ``partial_stream_problems`` first)."""
    if not modules or not events_dir.is_dir():
        return False
    stream = _PartialStream(events_dir / PARTIALS, modules[0].AnsibleJSONEncoderLocal)
    for module in modules:
        module.event_context.cache = stream
    return True


class PartialReader:
    """The events' data of one run: from the stream, read as far as needed, else from per-event files."""

    def __init__(self, events_dir: Path) -> None:
        self.events_dir = events_dir
        self._found: dict[str, dict[str, Any]] = {}
        self._handle: Any = None
        self._rest = b""

    def take(self, uuid: str) -> dict[str, Any] | None:
        """The data of event ``uuid`` (then forgotten), or None."""
        if uuid not in self._found:
            self._read_more()
        data = self._found.pop(uuid, None)
        if data is not None:
            return data
        partial = self.events_dir / f"{uuid}-partial.json"
        try:
            loaded = json.loads(partial.read_text(encoding="utf-8"))
            partial.unlink()
        except (OSError, ValueError):
            return None
        return loaded if isinstance(loaded, dict) else None

    def _read_more(self) -> None:
        if self._handle is None:
            try:
                self._handle = (self.events_dir / PARTIALS).open("rb")
            except OSError:
                return
        chunk = self._handle.read()
        if not chunk:
            return
        *lines, self._rest = (self._rest + chunk).split(b"\n")
        for line in lines:
            try:
                entry = json.loads(line)
                self._found[str(entry["uuid"])] = dict(entry["data"])
            except (ValueError, KeyError, TypeError):
                continue

    def close(self) -> None:
        """Done: the stream is no artifact of ansible-runner's, so it goes."""
        if self._handle is not None:
            self._handle.close()
        (self.events_dir / PARTIALS).unlink(missing_ok=True)


_DEBUG_GATE = "Display._meets_debug.<locals>.wrapper"  # ansible-core's check of DEFAULT_DEBUG around debug
_MARKING = "with_context.<locals>.wrap.<locals>.wrapper"  # awx_display's marking around each method


def _code_of(function: Any) -> tuple[str, str]:
    """Where a function's code is (``functools.wraps`` gives a wrapper its wrapped function's names)."""
    code = getattr(function, "__code__", None)
    return (getattr(code, "co_filename", ""), getattr(code, "co_qualname", "")) if code else ("", "")


def quiet_debug(modules: list[Any]) -> list[str]:
    """``Display.debug`` without these ``awx_display`` modules' event marking, when Ansible's debug output is
    off (see the module docstring); why it was left as it is (empty: it was changed)."""
    from ansible import constants
    from ansible.utils.display import Display

    if constants.DEFAULT_DEBUG:
        return ["Ansible's debug output is on"]
    markings = {(getattr(module, "__file__", None), _MARKING) for module in modules}
    method = Display.debug
    while _code_of(method) in markings and hasattr(method, "__wrapped__"):
        method = method.__wrapped__
    if method is Display.debug:
        return ["Display.debug: not wrapped by awx_display"]
    if (found := _code_of(method)[1]) != _DEBUG_GATE:
        return [f"Display.debug: awx_display wraps {found or '?'}, not {_DEBUG_GATE}"]
    Display.debug = method
    return []
