"""watches.yaml: which kind maps to which role or playbook, and how it is reconciled.

Read once at start-up by ``cli`` and handed to the reactor. The format is operator-sdk's, field for field
(see the README for the few defaults we changed); every problem is reported as a ``ConfigError`` naming the
entry (index and group/version/kind) and the field, so a bad file fails before any watch starts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hybrid_operator.durations import parse_duration
from hybrid_operator.errors import ConfigError

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_FQCN_ROLE = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
_FINALIZER_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")

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
    "snakeCaseParameters",
    "markUnsafe",
    "maxRunnerArtifacts",
    "finalizer",
    "selector",
    "blacklist",
}
_FINALIZER_FIELDS = {"name", "role", "playbook", "vars"}
_SELECTOR_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}


@dataclass(frozen=True, order=True)
class GVK:
    """A group/version/kind; group is "" for the core API group."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.kind}.{self.version}.{self.group}" if self.group else f"{self.kind}.{self.version}"


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
    snake_case_parameters: bool = True
    mark_unsafe: bool = True  # operator-sdk defaults to false; CR data is never a template here
    max_runner_artifacts: int = 20
    finalizer: Finalizer | None = None
    selector: str = ""  # label selector in the API's query syntax
    blacklist: frozenset[GVK] = frozenset()


def load_watches(path: Path, *, roles_paths: Sequence[Path] = (), env: Mapping[str, str] | None = None) -> list[Watch]:
    """Parse and validate a watches.yaml file; raise ConfigError naming the entry and field."""
    env = os.environ if env is None else env
    try:
        raw_text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read watches file {path}: {exc.strerror}") from exc
    expanded = _ENV_REF.sub(lambda m: env.get(m.group(1), m.group(0)), raw_text)
    try:
        entries = yaml.safe_load(expanded)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
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


class _Entry:
    """Field accessors that raise ConfigError with the entry's name in the message."""

    def __init__(self, path: Path, index: int, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        gvk = "/".join(str(raw.get(k, "?")) for k in ("group", "version", "kind"))
        self.where = f"{path}: entry {index} ({gvk})"

    def fail(self, field_name: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.where}: field '{field_name}': {problem}")

    def string(self, name: str, *, required: bool = False, default: str = "") -> str:
        value = self.raw.get(name)
        if value is None:
            if required:
                raise self.fail(name, "is required")
            return default
        if not isinstance(value, str):
            raise self.fail(name, f"must be a string, got {type(value).__name__} {value!r}")
        if required and not value.strip():
            raise self.fail(name, "must not be empty")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        value = self.raw.get(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, f"must be true or false, got {value!r}")
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
    gvk = GVK(entry.string("group"), entry.string("version", required=True), entry.string("kind", required=True))
    target = _parse_target(entry, raw, base_dirs, roles_paths, required=True)
    assert target is not None
    period: float | None = None
    if raw.get("reconcilePeriod") is not None:
        try:
            period = parse_duration(raw["reconcilePeriod"])
        except ValueError as exc:
            raise entry.fail("reconcilePeriod", str(exc)) from exc
    max_artifacts = raw.get("maxRunnerArtifacts", 20)
    if isinstance(max_artifacts, bool) or not isinstance(max_artifacts, int) or max_artifacts < 1:
        raise entry.fail("maxRunnerArtifacts", f"must be a whole number >= 1, got {max_artifacts!r}")
    return Watch(
        gvk=gvk,
        target=target,
        vars=entry.mapping("vars"),
        reconcile_period=period,
        manage_status=entry.boolean("manageStatus", True),
        watch_dependent_resources=entry.boolean("watchDependentResources", True),
        watch_cluster_scoped_resources=entry.boolean("watchClusterScopedResources", False),
        watch_annotations_changes=entry.boolean("watchAnnotationsChanges", False),
        snake_case_parameters=entry.boolean("snakeCaseParameters", True),
        mark_unsafe=entry.boolean("markUnsafe", True),
        max_runner_artifacts=max_artifacts,
        finalizer=_parse_finalizer(entry, base_dirs, roles_paths),
        selector=_parse_selector(entry),
        blacklist=_parse_blacklist(entry),
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
            raise entry.fail(prefix + name, f"must be a non-empty string, got {value!r}")
    if playbook:  # operator-sdk: when both are given, the playbook wins
        found = _first_existing(Path(playbook), base_dirs)
        if found is None or not found.is_file():
            raise entry.fail(prefix + "playbook", f"file not found: {playbook}")
        return Target(playbook=found)
    if role:
        return Target(role=_resolve_role(entry, prefix + "role", role, base_dirs, roles_paths))
    if required:
        raise entry.fail(prefix + "role", "one of 'role' or 'playbook' is required")
    return None


def _resolve_role(
    entry: _Entry, field_name: str, role: str, base_dirs: Sequence[Path], roles_paths: Sequence[Path]
) -> str:
    """operator-sdk's lookup order: absolute path, ANSIBLE_ROLES_PATH, collection FQCN, ./roles/<name>."""
    candidate = Path(role)
    if candidate.is_absolute():
        if not candidate.is_dir():
            raise entry.fail(field_name, f"role directory not found: {role}")
        return str(candidate)
    for directory in roles_paths:
        if (directory / role).is_dir():
            return str((directory / role).resolve())
    if _FQCN_ROLE.match(role):
        return role  # resolved by Ansible through the collections path at run time
    for base in base_dirs:
        for option in (base / "roles" / role, base / role):
            if option.is_dir():
                return str(option.resolve())
    searched = [str(d) for d in roles_paths] + [str(b / "roles") for b in base_dirs]
    raise entry.fail(field_name, f"role '{role}' not found (searched {', '.join(searched)})")


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
    if not isinstance(name, str) or not _FINALIZER_NAME.match(name):
        raise entry.fail("finalizer.name", f"required, a qualified name like example.com/cleanup, got {name!r}")
    target = _parse_target(entry, raw, base_dirs, roles_paths, required=False, prefix="finalizer.")
    fvars = raw.get("vars") or {}
    if not isinstance(fvars, dict):
        raise entry.fail("finalizer.vars", "must be a mapping")
    if target is None and not fvars:
        raise entry.fail("finalizer", "needs a role, a playbook or vars")
    return Finalizer(name=name, target=target, vars=fvars)


def _parse_selector(entry: _Entry) -> str:
    raw = entry.mapping("selector")
    unknown = sorted(set(raw) - {"matchLabels", "matchExpressions"})
    if unknown:
        raise entry.fail(f"selector.{unknown[0]}", "unknown field (known: matchLabels, matchExpressions)")
    parts = []
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, dict):
        raise entry.fail("selector.matchLabels", "must be a mapping of label to value")
    for key, value in labels.items():
        parts.append(f"{key}={value}")
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise entry.fail("selector.matchExpressions", "must be a list")
    for i, expr in enumerate(expressions):
        where = f"selector.matchExpressions[{i}]"
        if not isinstance(expr, dict) or "key" not in expr or expr.get("operator") not in _SELECTOR_OPERATORS:
            raise entry.fail(where, f"needs key and operator (one of {', '.join(sorted(_SELECTOR_OPERATORS))})")
        op, key, values = expr["operator"], expr["key"], expr.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                raise entry.fail(where, f"operator {op} needs a non-empty 'values' list")
            parts.append(f"{key} {op.lower()} ({','.join(str(v) for v in values)})")
        else:
            parts.append(key if op == "Exists" else f"!{key}")
    return ",".join(parts)


def _parse_blacklist(entry: _Entry) -> frozenset[GVK]:
    raw = entry.raw.get("blacklist") or []
    if not isinstance(raw, list):
        raise entry.fail("blacklist", "must be a list of {group, version, kind}")
    out = set()
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not item.get("kind") or not item.get("version"):
            raise entry.fail(f"blacklist[{i}]", "needs version and kind (group may be empty)")
        out.add(GVK(str(item.get("group") or ""), str(item["version"]), str(item["kind"])))
    return frozenset(out)


def _first_existing(candidate: Path, base_dirs: Sequence[Path]) -> Path | None:
    if candidate.is_absolute():
        return candidate if candidate.exists() else None
    for base in base_dirs:
        if (base / candidate).exists():
            return (base / candidate).resolve()
    return None


def _unique(paths: Sequence[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p not in out:
            out.append(p)
    return out
