"""watches.yaml: which kind maps to which role or playbook, and how it is reconciled.

Read once at start-up by ``cli`` and handed to the reactor. The format is operator-sdk's, field for field
(docs/roles/watches.md lists the few defaults we changed); every problem is reported as a ``ConfigError`` naming the
entry (index and group/version/kind) and the field, so a bad file fails before any watch starts.

The file is untrusted input: ``yamlfiles`` reads it with bounds (size, depth, no aliases), ``names``
checks group, version, kind, label selectors and finalizer names as the API server would, ``durations``
bounds the reconcile period and ``targets`` makes sure a role is a role and a playbook a playbook.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybrid_operator.errors import ConfigError
from hybrid_operator.kube.objects import GVK
from hybrid_operator.settings import names, targets, yamlfiles
from hybrid_operator.settings.durations import parse_period

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

KNOWN_FIELDS = {
    "group",
    "version",
    "kind",
    "role",
    "playbook",
    "vars",
    "reconcilePeriod",
    "manageStatus",
    "watchDependentResources",
    "watchClusterScopedResources",
    "watchAnnotationsChanges",
    "watchDependentStatusChanges",
    "skipConvergedAtStart",
    "snakeCaseParameters",
    "markUnsafe",
    "maxRunnerArtifacts",
    "finalizer",
    "selector",
    "blacklist",
    "runNamespaces",
}
_FINALIZER_FIELDS = {"name", "role", "playbook", "vars"}
_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "In", "NotIn")  # a tuple: `in` must not hash what it tests
_EXPRESSION_FIELDS = {"key", "operator", "values"}


@dataclass(frozen=True)
class Target:
    """What to run: exactly one of a role (path or collection FQCN) and a playbook path."""

    role: str | None = None
    playbook: Path | None = None

    def describe(self) -> str:
        return f"playbook {self.playbook}" if self.playbook else f"role {self.role}"


@dataclass(frozen=True)
class Finalizer:
    name: str
    target: Target | None  # None: run the watch's own target with ``vars``
    vars: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Watch:
    """One watches.yaml entry, validated and with every default filled in."""

    gvk: GVK
    target: Target
    vars: Mapping[str, Any] = field(default_factory=dict)
    reconcile_period: float | None = None  # None: the --reconcile-period flag
    manage_status: bool = True
    watch_dependent_resources: bool = True
    watch_cluster_scoped_resources: bool = False
    watch_annotations_changes: bool = False
    # A dependent's status change (a Deployment's availableReplicas) wakes this owner: for roles that read
    # their children's status. Off, status churn wakes nobody (no reconcile storms).
    watch_dependent_status_changes: bool = False
    # At start-up, an object whose generation this role content and operator already reconciled, and whose
    # children nobody changed since, is not run again (reactor.resuming). Off: every object runs at start.
    skip_converged_at_start: bool = False
    snake_case_parameters: bool = True
    mark_unsafe: bool = True  # operator-sdk defaults to false; CR data is never a template here
    max_runner_artifacts: int = 20
    finalizer: Finalizer | None = None
    selector: str = ""  # label selector in the API's query syntax
    blacklist: frozenset[GVK] = frozenset()
    # Namespaces a run may reach besides its object's own when runs are confined (--run-namespaces).
    run_namespaces: frozenset[str] = frozenset()


def load_watches(path: Path, *, roles_paths: Sequence[Path] = (), env: Mapping[str, str] | None = None) -> list[Watch]:
    """Parse and validate a watches.yaml file; raise ConfigError naming the entry and field."""
    env = os.environ if env is None else env
    raw_text = yamlfiles.read_text(path, what="watches file")
    # ${VAR} is replaced in the text, before parsing: a value may add YAML structure, and every check
    # below runs on what results. Only the size needs checking again.
    expanded = _ENV_REF.sub(lambda m: env.get(m.group(1), m.group(0)), raw_text)
    if len(expanded) > yamlfiles.MAX_BYTES:
        raise ConfigError(f"{path}: over the limit of {yamlfiles.MAX_BYTES >> 20} MiB after ${{VAR}} expansion")
    entries = _load_yaml(expanded, path)
    if entries is None:
        raise ConfigError(f"{path}: empty watches file, expected a list of entries")
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: expected a list of entries, found {type(entries).__name__}")
    base_dirs = _unique([path.resolve().parent, Path.cwd()])
    watches: list[Watch] = []
    seen: dict[GVK, int] = {}
    for index, entry in enumerate(entries):
        watch = _parse_entry(path, index, entry, base_dirs, roles_paths)
        if watch.gvk in seen:
            gvk = f"{watch.gvk.group}/{watch.gvk.version}/{watch.gvk.kind}"
            first = seen[watch.gvk]
            raise ConfigError(f"{path}: entry {index} ({gvk}): duplicate group/version/kind, already in entry {first}")
        seen[watch.gvk] = index
        watches.append(watch)
    if not watches:
        raise ConfigError(f"{path}: no entries")
    return watches


def _load_yaml(text: str, path: Path) -> object:
    try:
        return yamlfiles.load(text, source=path)
    except yamlfiles.YamlError as exc:
        if not exc.path or not isinstance(exc.path[0], int):
            raise
        gvk = "/".join(_plain(exc.item.get(k, "?")) for k in ("group", "version", "kind"))
        field_name = f"field '{_plain(yamlfiles.render_path(exc.path[1:]), 80)}': " if exc.path[1:] else ""
        raise ConfigError(f"{path}: entry {exc.path[0]} ({gvk}): {field_name}{exc.problem} ({exc.where})") from exc


class _Entry:
    """Field accessors that raise ConfigError with the entry's name in the message."""

    def __init__(self, path: Path, index: int, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        gvk = "/".join(_plain(raw.get(k, "?")) for k in ("group", "version", "kind"))
        self.where = f"{path}: entry {index} ({gvk})"

    def fail(self, field_name: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.where}: field '{_plain(field_name, 80)}': {problem}")

    def string(
        self,
        name: str,
        *,
        required: bool = False,
        default: str = "",
        raw: Mapping[Any, Any] | None = None,
        prefix: str = "",
    ) -> str:
        """A string field of the entry, or of ``raw`` (a part of it, its fields named ``prefix``+name)."""
        value = (self.raw if raw is None else raw).get(name)
        if value is None:
            if required:
                raise self.fail(prefix + name, "is required")
            return default
        if not isinstance(value, str):
            raise self.fail(prefix + name, f"must be a string, got {type(value).__name__} {_short(value)}")
        if required and not value.strip():
            raise self.fail(prefix + name, "must not be empty")
        return value

    def gvk(self, raw: Mapping[Any, Any] | None = None, prefix: str = "") -> GVK:
        """group, version and kind, each checked as the API server checks a CRD's."""
        parts = []
        for name, problem_of in (
            ("group", names.group_problem),
            ("version", names.version_problem),
            ("kind", names.kind_problem),
        ):
            value = self.string(name, required=name != "group", raw=raw, prefix=prefix)
            problem = problem_of(value) if value else None
            if problem:
                raise self.fail(prefix + name, f"{_short(value)}: {problem}")
            parts.append(value)
        return GVK(*parts)

    def boolean(self, name: str, default: bool) -> bool:
        value = self.raw.get(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, f"must be true or false, got {_short(value)}")
        return value

    def mapping(self, name: str) -> dict[str, Any]:
        value = self.raw.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(name, f"must be a mapping, got {type(value).__name__}")
        return value


def _parse_entry(path: Path, index: int, raw: object, base_dirs: Sequence[Path], roles_paths: Sequence[Path]) -> Watch:
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: entry {index}: expected a mapping, got {type(raw).__name__}")
    entry = _Entry(path, index, raw)
    unknown = sorted(str(k) for k in set(raw) - KNOWN_FIELDS)
    if unknown:
        raise entry.fail(unknown[0], f"unknown field (known: {', '.join(sorted(KNOWN_FIELDS))})")
    gvk = entry.gvk()
    target = _parse_target(entry, raw, base_dirs, roles_paths, required=True)
    assert target is not None
    period: float | None = None
    if raw.get("reconcilePeriod") is not None:
        try:
            period = parse_period(raw["reconcilePeriod"])
        except ValueError as exc:
            raise entry.fail("reconcilePeriod", str(exc)) from exc
    max_artifacts = raw.get("maxRunnerArtifacts", 20)
    if isinstance(max_artifacts, bool) or not isinstance(max_artifacts, int) or max_artifacts < 1:
        raise entry.fail("maxRunnerArtifacts", f"must be a whole number >= 1, got {_short(max_artifacts)}")
    return Watch(
        gvk=gvk,
        target=target,
        vars=entry.mapping("vars"),
        reconcile_period=period,
        manage_status=entry.boolean("manageStatus", True),
        watch_dependent_resources=entry.boolean("watchDependentResources", True),
        watch_cluster_scoped_resources=entry.boolean("watchClusterScopedResources", False),
        watch_annotations_changes=entry.boolean("watchAnnotationsChanges", False),
        watch_dependent_status_changes=entry.boolean("watchDependentStatusChanges", False),
        skip_converged_at_start=entry.boolean("skipConvergedAtStart", False),
        snake_case_parameters=entry.boolean("snakeCaseParameters", True),
        mark_unsafe=entry.boolean("markUnsafe", True),
        max_runner_artifacts=max_artifacts,
        finalizer=_parse_finalizer(entry, base_dirs, roles_paths),
        selector=_parse_selector(entry),
        blacklist=_parse_blacklist(entry),
        run_namespaces=_parse_run_namespaces(entry),
    )


def _parse_target(
    entry: _Entry,
    raw: Mapping[str, Any],
    base_dirs: Sequence[Path],
    roles_paths: Sequence[Path],
    *,
    required: bool,
    prefix: str = "",
) -> Target | None:
    role = raw.get("role")
    playbook = raw.get("playbook")
    for name, value in (("role", role), ("playbook", playbook)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise entry.fail(prefix + name, f"must be a non-empty string, got {_short(value)}")
    try:
        if playbook:  # operator-sdk: when both are given, the playbook wins
            return Target(playbook=targets.resolve_playbook(playbook, base_dirs))
        if role:
            return Target(role=targets.resolve_role(role, base_dirs, roles_paths))
    except ValueError as exc:
        raise entry.fail(prefix + ("playbook" if playbook else "role"), str(exc)) from exc
    if required:
        raise entry.fail(prefix + "role", "one of 'role' or 'playbook' is required")
    return None


def _parse_finalizer(entry: _Entry, base_dirs: Sequence[Path], roles_paths: Sequence[Path]) -> Finalizer | None:
    raw = entry.raw.get("finalizer")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise entry.fail("finalizer", "must be a mapping with 'name' and one of role, playbook or vars")
    unknown = sorted(str(k) for k in set(raw) - _FINALIZER_FIELDS)
    if unknown:
        raise entry.fail(f"finalizer.{unknown[0]}", "unknown field (known: name, role, playbook, vars)")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise entry.fail("finalizer.name", f"required, a qualified name like example.com/cleanup, got {_short(name)}")
    problem = names.qualified_name_problem(name)
    if problem:
        raise entry.fail(
            "finalizer.name", f"{_short(name)} is not a qualified name like example.com/cleanup: {problem}"
        )
    target = _parse_target(entry, raw, base_dirs, roles_paths, required=False, prefix="finalizer.")
    fvars = raw.get("vars") or {}
    if not isinstance(fvars, dict):
        raise entry.fail("finalizer.vars", "must be a mapping")
    if target is None and not fvars:
        raise entry.fail("finalizer", "needs a role, a playbook or vars")
    return Finalizer(name=name, target=target, vars=fvars)


def _parse_selector(entry: _Entry) -> str:
    """The selector in the API's query syntax; every key and value checked, so none can add a requirement."""
    raw = entry.mapping("selector")
    unknown = sorted(str(k) for k in set(raw) - {"matchLabels", "matchExpressions"})
    if unknown:
        raise entry.fail(f"selector.{unknown[0]}", "unknown field (known: matchLabels, matchExpressions)")
    parts = []
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, dict):
        raise entry.fail("selector.matchLabels", "must be a mapping of label to value")
    for key, value in labels.items():
        where = f"selector.matchLabels.{key}"
        _check_label(entry, where, key, names.qualified_name_problem, "label key")
        _check_label(entry, where, value, names.label_value_problem, "label value")
        parts.append(f"{key}={value}")
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise entry.fail("selector.matchExpressions", "must be a list")
    for i, expr in enumerate(expressions):
        parts.append(_parse_expression(entry, f"selector.matchExpressions[{i}]", expr))
    return ",".join(parts)


def _parse_expression(entry: _Entry, where: str, expr: object) -> str:
    if not isinstance(expr, dict) or "key" not in expr or expr.get("operator") not in _SELECTOR_OPERATORS:
        raise entry.fail(where, f"needs key and operator (one of {', '.join(_SELECTOR_OPERATORS)})")
    unknown = sorted(str(k) for k in set(expr) - _EXPRESSION_FIELDS)
    if unknown:
        raise entry.fail(f"{where}.{unknown[0]}", "unknown field (known: key, operator, values)")
    op, key, values = expr["operator"], expr["key"], expr.get("values") or []
    _check_label(entry, f"{where}.key", key, names.qualified_name_problem, "label key")
    if not isinstance(values, list):
        raise entry.fail(f"{where}.values", "must be a list of label values")
    for j, value in enumerate(values):
        _check_label(entry, f"{where}.values[{j}]", value, names.label_value_problem, "label value")
    if op in ("In", "NotIn"):
        if not values:
            raise entry.fail(where, f"operator {op} needs a non-empty 'values' list")
        return f"{key} {op.lower()} ({','.join(values)})"
    if values:
        raise entry.fail(f"{where}.values", f"must be empty for operator {op}")
    return str(key) if op == "Exists" else f"!{key}"


def _check_label(entry: _Entry, where: str, value: object, problem_of: Callable[[str], str | None], what: str) -> None:
    if not isinstance(value, str):
        raise entry.fail(where, f"{what} must be a string (quote numbers and true/false), got {_short(value)}")
    problem = problem_of(value)
    if problem:
        raise entry.fail(where, f"{what} {_short(value)}: {problem}")


MAX_RUN_NAMESPACES = 64


def _parse_run_namespaces(entry: _Entry) -> frozenset[str]:
    """``runNamespaces``: a list of namespace names (DNS labels), at most ``MAX_RUN_NAMESPACES``."""
    raw = entry.raw.get("runNamespaces")
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or len(raw) > MAX_RUN_NAMESPACES:
        raise entry.fail("runNamespaces", f"must be a list of at most {MAX_RUN_NAMESPACES} namespace names")
    for i, name in enumerate(raw):
        problem = names.namespace_problem(name) if isinstance(name, str) else "must be a string"
        if problem:
            raise entry.fail(f"runNamespaces[{i}]", f"{problem}, got {_short(name)}")
    return frozenset(raw)


def _parse_blacklist(entry: _Entry) -> frozenset[GVK]:
    raw = entry.raw.get("blacklist") or []
    if not isinstance(raw, list):
        raise entry.fail("blacklist", "must be a list of {group, version, kind}")
    out = set()
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not item.get("kind") or not item.get("version"):
            raise entry.fail(f"blacklist[{i}]", "needs version and kind (group may be empty)")
        unknown = sorted(str(k) for k in set(item) - {"group", "version", "kind"})
        if unknown:
            raise entry.fail(f"blacklist[{i}].{unknown[0]}", "unknown field (known: group, version, kind)")
        out.add(entry.gvk(item, prefix=f"blacklist[{i}]."))
    return frozenset(out)


def _short(value: object, limit: int = 60) -> str:
    """repr(value), cut short: a hostile file must not turn one error line into megabytes."""
    return _plain(repr(value), limit)


def _plain(value: object, limit: int = 64) -> str:
    """str(value) on one line, cut short."""
    shown = " ".join(str(value).split())
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def _unique(paths: Sequence[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p not in out:
            out.append(p)
    return out
