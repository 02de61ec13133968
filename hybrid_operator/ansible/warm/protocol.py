"""The messages between the warm executor (``zygoteclient``) and its zygote (``zygote``), typed at the edge.

One JSON object per line over a private Unix stream socket the executor made with ``socketpair``. Each side
parses what the other sent into these types before anything else sees it (a line of more than
``MAX_LINE`` bytes, a field of the wrong type or out of range is a ``ProtocolError`` naming the field):

- executor -> zygote: ``WarmUp`` once, then ``Run`` per run; end of file stops the zygote, after it has
  stopped the runs still going.
- zygote -> executor: ``Ready`` or ``Fatal`` once; per run ``Started`` then ``Exited``.

``RunSpec`` is one run as ansible-runner would start it: the ``ansible-playbook`` command line, its
environment and working directory, the file its terminal output goes to, its timeout, and ``cold`` (exec
the real ``ansible-playbook`` instead of forking: the run's environment changes Ansible's configuration).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_LINE = 8 << 20  # bytes: a run's environment is the biggest part (the operator's own is in it)
MAX_PREPARED = 1000  # directories a warm-up may name for the zygote to prepare
TIMED_OUT_RC = 254  # what ansible-runner reports for a run it killed at its timeout
# A file in the zygote's working dir (the client's, private): the local temp dir Ansible made for the zygote,
# which the client removes when the zygote was killed before Ansible could (``ZygoteClient``).
LOCAL_TMP_NOTE = "local-tmp"


class ProtocolError(ValueError):
    """A message that is not one of ours."""


@dataclass(frozen=True)
class RunSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    output: str
    timeout: float | None
    cold: bool = False


@dataclass(frozen=True)
class WarmUp:
    run: RunSpec
    # Absolute directories whose roles the zygote prepares besides its roles path (``warm.project``).
    prepare: list[str] = field(default_factory=list)
    # Absolute playbooks the zygote loads ahead for the runs that will load them (``warm.plays``).
    playbooks: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Run:
    id: int
    run: RunSpec


@dataclass(frozen=True)
class Ready:
    pid: int
    ansible_version: str
    seconds: float
    modules_in_worker: bool  # the module hooks are installed (``inworker``)
    why_not_in_worker: str = ""
    why_not_lean: str = ""  # why the lean path (``lean``) is off; empty: it is on
    heap: str = ""  # what ``heap.settle`` did with the warm-up's objects (``Settled.describe``)


@dataclass(frozen=True)
class Fatal:
    error: str


@dataclass(frozen=True)
class Started:
    id: int
    pid: int


@dataclass(frozen=True)
class Exited:
    id: int
    rc: int
    timed_out: bool


Message = WarmUp | Run | Ready | Fatal | Started | Exited
_OPS: dict[str, type[Message]] = {
    "warm-up": WarmUp,
    "run": Run,
    "ready": Ready,
    "fatal": Fatal,
    "started": Started,
    "exited": Exited,
}
_OP_OF = {cls: op for op, cls in _OPS.items()}


def encode(message: Message) -> bytes:
    return json.dumps({"op": _OP_OF[type(message)], **asdict(message)}).encode() + b"\n"


def decode(line: bytes) -> Message:
    try:
        raw = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"not JSON: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("op") not in _OPS:
        raise ProtocolError(f"op: unknown ({raw.get('op') if isinstance(raw, dict) else type(raw).__name__!r})")
    op = raw["op"]
    if op in ("warm-up", "run"):
        run = _run_spec(_field(raw, "run", dict))
        return WarmUp(run, _paths(raw, "prepare"), _paths(raw, "playbooks")) if op == "warm-up" else Run(_id(raw), run)
    if op == "ready":
        return Ready(
            pid=_pid(raw),
            ansible_version=_field(raw, "ansible_version", str),
            seconds=float(_field(raw, "seconds", (int, float))),
            modules_in_worker=_field(raw, "modules_in_worker", bool),
            why_not_in_worker=_field(raw, "why_not_in_worker", str),
            why_not_lean=_field(raw, "why_not_lean", str),
            heap=_field(raw, "heap", str),
        )
    if op == "fatal":
        return Fatal(_field(raw, "error", str))
    if op == "started":
        return Started(_id(raw), _pid(raw))
    rc = _field(raw, "rc", int)
    if not -255 <= rc <= 255:
        raise ProtocolError(f"rc: {rc} is not an exit code")
    return Exited(_id(raw), rc, _field(raw, "timed_out", bool))


def _run_spec(raw: dict[str, Any]) -> RunSpec:
    argv, env = _field(raw, "argv", list), _field(raw, "env", dict)
    if not argv or not all(isinstance(arg, str) for arg in argv):
        raise ProtocolError("run.argv: not a non-empty list of strings")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ProtocolError("run.env: not a map of strings")
    timeout = raw.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
        raise ProtocolError(f"run.timeout: {timeout!r} is not a positive number of seconds")
    return RunSpec(argv, env, _field(raw, "cwd", str), _field(raw, "output", str), timeout, _field(raw, "cold", bool))


def _paths(raw: dict[str, Any], name: str) -> list[str]:
    paths = raw.get(name, [])
    if not isinstance(paths, list) or len(paths) > MAX_PREPARED:
        raise ProtocolError(f"{name}: not a list of at most {MAX_PREPARED} paths")
    if not all(isinstance(d, str) and d.startswith("/") and "\0" not in d for d in paths):
        raise ProtocolError(f"{name}: not a list of absolute paths")
    return paths


def _field(raw: dict[str, Any], name: str, kind: type[Any] | tuple[type[Any], ...]) -> Any:
    value = raw.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
        raise ProtocolError(f"{name}: {type(value).__name__} where {getattr(kind, '__name__', kind)} was expected")
    return value


def _id(raw: dict[str, Any]) -> int:
    value = _field(raw, "id", int)
    if value < 0:
        raise ProtocolError(f"id: {value} is negative")
    return int(value)


def _pid(raw: dict[str, Any]) -> int:
    value = _field(raw, "pid", int)
    if value <= 1:
        raise ProtocolError(f"pid: {value} is not a process of ours")
    return int(value)


class LineReader:
    """Splits what a socket delivers into messages; a line longer than ``MAX_LINE`` is refused."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[Message]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > MAX_LINE or any(len(line) > MAX_LINE for line in lines):
            raise ProtocolError(f"a message longer than {MAX_LINE} bytes")
        return [decode(line) for line in lines if line.strip()]
