"""Custom metrics from roles: what ``operator_sdk.util.osdk_metric`` sends, parsed, kept and exposed.

Beside the reconcile flow, not in it: a role's ``osdk_metric`` task (our action plugin in
``hybrid_operator.util``, or the module of the Galaxy collection) POSTs one JSON *UserMetric* to the
receiver (``receiving``); ``parse`` turns the body into a typed ``UserMetric`` with bounds, ``UserMetrics``
creates or updates the metric, and ``health`` appends ``UserMetrics.render()`` to the operator's /metrics.
Nothing here talks to the API server.

The protocol is operator-sdk's (ansible-operator's ``metrics.UserMetric``)::

    {"name": "my_metric", "description": "help text",
     "counter":   {"increment": bool, "add": float}                 # exactly one of these four
     "gauge":     {"set": float, "increment": bool, "decrement": bool,
                   "add": float, "subtract": float, "set_to_current_time": bool}
     "histogram": {"observe": float}
     "summary":   {"observe": float}}

As upstream: ``null`` means absent, unknown keys are ignored, one operation is applied in the order
listed in ``_counter``/``_gauge``, a histogram or summary request always observes (``observe`` absent: 0),
the help text is the one given at creation, histograms use Prometheus' default buckets and summaries have
no quantiles. Unlike upstream, ``gauge.set: 0`` sets 0 (upstream cannot tell it from absent), and what
upstream would register half-way or not at all is refused with a reason: names Prometheus would reject,
names of the operator's own metrics, a second type under one name (histogram and summary included).
The receiver is loopback-only by default but any local process may write to it, so every input is
bounded: body size, name and help length, number of metrics, finite numbers.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from prometheus_client import utils as prometheus_utils

from hybrid_operator.errors import OperatorError
from hybrid_operator.metrics import REGISTRY

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
MAX_METRICS = 1000
MAX_NAME_CHARS = 200
MAX_HELP_CHARS = 1024
# Prometheus' default buckets (client_golang DefBuckets), which upstream's histograms get.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Names under these prefixes are the operator's own (ours, upstream's, and controller-runtime's, which we
# mirror): a role may not shadow them even before the operator exports one.
RESERVED_PREFIXES = ("hybrid_operator_", "ansible_operator_", "controller_runtime_", "workqueue_")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# Every name a prometheus_client family may expose, whatever its type.
_OWN_SUFFIXES = ("", "_total", "_created", "_bucket", "_sum", "_count", "_info", "_gsum", "_gcount")

# Values are written as the rest of /metrics writes them (prometheus_client's Go-like format).
_number_text: Callable[[float], str] = prometheus_utils.floatToGoString

Kind = Literal["counter", "gauge", "histogram", "summary"]
KINDS: tuple[Kind, ...] = ("counter", "gauge", "histogram", "summary")
Verb = Literal["inc", "dec", "add", "sub", "set", "set_to_current_time", "observe"]


class UserMetricError(OperatorError):
    """A request the receiver refuses; its message is the answer's body (HTTP ``status``)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Operation:
    verb: Verb
    value: float = 0.0


@dataclass(frozen=True)
class UserMetric:
    """One parsed request: create the metric if new, then apply ``operation`` (None: only create)."""

    name: str
    help: str
    kind: Kind
    operation: Operation | None


def parse(body: bytes) -> UserMetric:
    """The request body as a ``UserMetric``, or ``UserMetricError`` naming what is wrong."""
    if len(body) > MAX_BODY_BYTES:
        raise UserMetricError(f"body is {len(body)} bytes; at most {MAX_BODY_BYTES} are accepted", 413)
    doc = _document(body)
    name = _name(doc.get("name"))
    help_text = _help(doc.get("description"))
    given = [kind for kind in KINDS if doc.get(kind) is not None]
    if not given:
        raise UserMetricError("a request should contain at least one metric (counter, gauge, histogram, summary)")
    if len(given) > 1:
        raise UserMetricError(f"only one metric can be processed at a time, got {', '.join(given)}")
    kind = given[0]
    spec = doc[kind]
    if not isinstance(spec, dict):
        raise UserMetricError(f"{kind}: must be an object")
    operation = {"counter": _counter, "gauge": _gauge}.get(kind, _observation)(kind, spec)
    return UserMetric(name, help_text, kind, operation)


def _refuse_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _document(body: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(body, parse_constant=_refuse_constant)
    except RecursionError:
        raise UserMetricError("body is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise UserMetricError(f"body is not JSON: {_short(str(exc))}") from None
    if not isinstance(doc, dict):
        raise UserMetricError("body must be a JSON object (a UserMetric)")
    return doc


def _help(value: object) -> str:
    if value is None:  # as upstream: no description, empty help
        return ""
    if not isinstance(value, str):
        raise UserMetricError("description: must be a string")
    if len(value) > MAX_HELP_CHARS:
        raise UserMetricError(f"description: {len(value)} characters; at most {MAX_HELP_CHARS}")
    return value


def _name(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise UserMetricError("name: required, a non-empty string")
    if len(value) > MAX_NAME_CHARS:
        raise UserMetricError(f"name: {len(value)} characters; at most {MAX_NAME_CHARS}")
    if not _NAME.fullmatch(value):
        raise UserMetricError(f"name: {value!r} is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)")
    return value


def _flag(kind: str, spec: dict[str, Any], key: str) -> bool:
    value = spec.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise UserMetricError(f"{kind}.{key}: must be true or false")
    return value


def _number(kind: str, spec: dict[str, Any], key: str) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserMetricError(f"{kind}.{key}: must be a number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise UserMetricError(f"{kind}.{key}: must be a finite number")
    return number


def _counter(kind: str, spec: dict[str, Any]) -> Operation | None:
    add = _number(kind, spec, "add")
    if _flag(kind, spec, "increment"):
        return Operation("inc")
    if add:
        if add < 0:
            raise UserMetricError("counter.add: counter metrics cannot decrease in value")
        return Operation("add", add)
    return None


def _gauge(kind: str, spec: dict[str, Any]) -> Operation | None:
    increment, decrement = _flag(kind, spec, "increment"), _flag(kind, spec, "decrement")
    add, subtract = _number(kind, spec, "add"), _number(kind, spec, "subtract")
    value, now = _number(kind, spec, "set"), _flag(kind, spec, "set_to_current_time")
    if increment:
        return Operation("inc")
    if decrement:
        return Operation("dec")
    if add:
        return Operation("add", add)
    if subtract:
        return Operation("sub", subtract)
    if value is not None:
        return Operation("set", value)
    return Operation("set_to_current_time") if now else None


def _observation(kind: str, spec: dict[str, Any]) -> Operation:
    return Operation("observe", _number(kind, spec, "observe") or 0.0)


@dataclass
class _Family:
    """One user metric's state; changed only under ``UserMetrics._lock``."""

    kind: Kind
    help: str
    value: float = 0.0  # counter, gauge
    total: float = 0.0  # histogram, summary: sum of observations
    count: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))  # non-cumulative

    def apply(self, op: Operation) -> None:
        if op.verb == "inc":
            self.value += 1
        elif op.verb == "dec":
            self.value -= 1
        elif op.verb == "add":
            self.value += op.value
        elif op.verb == "sub":
            self.value -= op.value
        elif op.verb == "set":
            self.value = op.value
        elif op.verb == "set_to_current_time":
            self.value = time.time()
        else:  # observe
            self.total += op.value
            self.count += 1
            index = bisect.bisect_left(BUCKETS, op.value)  # the first bucket whose bound is >= the value
            if index < len(BUCKETS):
                self.buckets[index] += 1

    def lines(self, name: str) -> Iterable[str]:
        escaped = self.help.replace("\\", r"\\").replace("\n", r"\n")
        yield f"# HELP {name} {escaped}\n# TYPE {name} {self.kind}\n"
        if self.kind in ("counter", "gauge"):
            yield f"{name} {_number_text(self.value)}\n"
            return
        if self.kind == "histogram":
            cumulative = 0
            for bound, hits in zip(BUCKETS, self.buckets, strict=True):
                cumulative += hits
                yield f'{name}_bucket{{le="{_number_text(bound)}"}} {cumulative}\n'
            yield f'{name}_bucket{{le="+Inf"}} {self.count}\n'
        yield f"{name}_sum {_number_text(self.total)}\n{name}_count {self.count}\n"


def exposed_names(name: str, kind: Kind) -> set[str]:
    """The sample names a user metric puts on /metrics."""
    suffixes = {"counter": [""], "gauge": [""], "histogram": ["", "_bucket", "_sum", "_count"]}
    return {name + suffix for suffix in suffixes.get(kind, ["", "_sum", "_count"])}


def own_names() -> set[str]:
    """Every name the operator's own registry exposes or may expose."""
    return {family.name + suffix for family in REGISTRY.collect() for suffix in _OWN_SUFFIXES}


class UserMetrics:
    """The roles' metrics by name: at most ``limit`` of them, each keeping its first type and help."""

    def __init__(self, limit: int = MAX_METRICS, reserved: Callable[[], set[str]] = own_names) -> None:
        self._limit = limit
        self._reserved = reserved
        self._lock = threading.Lock()
        self._families: dict[str, _Family] = {}
        self._taken: dict[str, str] = {}  # exposed sample name -> the user metric exposing it

    def apply(self, metric: UserMetric) -> None:
        with self._lock:
            family = self._families.get(metric.name)
            if family is None:
                family = self._create(metric)
            elif family.kind != metric.kind:
                raise UserMetricError(f"cannot change metric type of {metric.name}, which is a {family.kind}")
            if metric.operation is not None:
                family.apply(metric.operation)

    def _create(self, metric: UserMetric) -> _Family:
        if len(self._families) >= self._limit:
            raise UserMetricError(f"too many metrics: at most {self._limit} may be created")
        if metric.name.startswith(RESERVED_PREFIXES):
            raise UserMetricError(f"name: {metric.name} is under a prefix the operator's own metrics use")
        names = exposed_names(metric.name, metric.kind)
        if clash := sorted(names & self._reserved()):
            raise UserMetricError(f"name: {metric.name} collides with the operator's metric {clash[0]}")
        if clash := sorted(names & self._taken.keys()):
            raise UserMetricError(f"name: {metric.name} collides with {clash[0]} of metric {self._taken[clash[0]]}")
        family = _Family(metric.kind, metric.help)
        self._families[metric.name] = family
        self._taken.update(dict.fromkeys(names, metric.name))
        log.info("registering role metric %s (%s)", metric.name, metric.kind)
        return family

    def __len__(self) -> int:
        with self._lock:
            return len(self._families)

    def render(self) -> bytes:
        """The metrics in Prometheus' text format, sorted by name, with exactly the names the roles gave."""
        with self._lock:
            text = "".join(line for name in sorted(self._families) for line in self._families[name].lines(name))
        return text.encode()


USER_METRICS = UserMetrics()
