"""A role's argument spec (``meta/argument_specs.yml``) and status declaration (``meta/operator.yml``), parsed.

Read by ``crds`` for ``hybrid-operator generate crds``. Both files come from a role a person wrote, maybe
someone else's: they are parsed here, with bounds (file size, nesting depth, number of options, text
lengths), into ``Option`` trees, and anything that is not Ansible's argument-spec format is refused with
an ``ArgumentSpecError`` naming the file and the path of the offending key (``options.replicas.type``).

``meta/operator.yml`` is hybrid-operator's own file in a role's meta: what the role writes into the
status of the object it reconciles (with ``hybrid_operator.util.k8s_status``), in the same format::

    status:
      options:
        availableReplicas: {type: int, description: Available replicas of the Deployment.}

Ansible ignores it; ansible-lint checks it as plain YAML.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hybrid_operator.errors import ConfigError

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 8  # options nested in options; real roles stay under 4
MAX_OPTIONS = 1000  # in one file, all levels together
MAX_TEXT = 4000  # characters of one description paragraph, or of one name
MAX_CHOICES = 256

# Ansible's types (ansible-core's DEFAULT_TYPE_VALIDATORS): what a CRD can say about each is in ``crds``.
TYPES = frozenset({"str", "list", "dict", "bool", "int", "float", "path", "raw", "jsonarg", "json", "bytes", "bits"})
# Every key Ansible's role argument specs know (ansible-lint's role-arg-spec schema); only the first
# group means anything to a CRD, the rest are accepted and left to Ansible.
_USED_KEYS = frozenset({"type", "description", "required", "default", "choices", "elements", "options"})
_ANSIBLE_ONLY_KEYS = frozenset(
    {
        "aliases",
        "apply_defaults",
        "deprecated_aliases",
        "example",
        "fallback",
        "mutually_exclusive",
        "no_log",
        "option-name",
        "removed_at_date",
        "removed_from_collection",
        "removed_in_version",
        "required_by",
        "required_if",
        "required_one_of",
        "required_together",
        "version_added",
    }
)
_JSON_SCALARS = (str, int, float, bool, type(None))


class ArgumentSpecError(ConfigError):
    """A role's meta file cannot be turned into a schema; the message names the file and the key."""


@dataclass(frozen=True)
class Option:
    """One option of an argument spec, with Ansible's defaults filled in (``type`` str, not required)."""

    name: str
    type: str = "str"
    description: str = ""
    required: bool = False
    has_default: bool = False
    default: Any = None
    choices: tuple[Any, ...] | None = None
    elements: str | None = None
    options: tuple[Option, ...] = ()


@dataclass(frozen=True)
class RoleSpec:
    """What ``generate crds`` needs from a role: its ``main`` options and the status it declares."""

    role: str
    short_description: str
    options: tuple[Option, ...]
    status: tuple[Option, ...]


def load_role_spec(role_dir: Path) -> RoleSpec | None:
    """The role's spec, or None when it has no ``meta/argument_specs.yml`` (nothing to generate from)."""
    specs_file = _first_file(role_dir / "meta", "argument_specs")
    if specs_file is None:
        return None
    raw = _read_yaml(specs_file)
    where = _Where(specs_file, "argument_specs")
    top = _mapping(raw, _Where(specs_file, ""))
    entry_points = _mapping(top.get("argument_specs"), where)
    main = _mapping(entry_points.get("main"), where.child("main"))
    counter = [0]
    options = parse_options(main.get("options"), where.child("main").child("options"), 0, counter)
    short = main.get("short_description", "")
    if not isinstance(short, str) or len(short) > MAX_TEXT:
        raise where.child("main").child("short_description").fail(f"must be a string of at most {MAX_TEXT} characters")
    status: tuple[Option, ...] = ()
    operator_file = _first_file(role_dir / "meta", "operator")
    if operator_file is not None:
        op_where = _Where(operator_file, "")
        declared = _mapping(_read_yaml(operator_file), op_where)
        unknown = sorted(str(k) for k in declared if k != "status")
        if unknown:
            raise op_where.child(unknown[0]).fail("unknown key (known: status)")
        status_raw = _mapping(declared.get("status") or {}, op_where.child("status"))
        extra = sorted(str(k) for k in status_raw if k != "options")
        if extra:
            raise op_where.child("status").child(extra[0]).fail("unknown key (known: options)")
        status = parse_options(status_raw.get("options"), op_where.child("status").child("options"), 0, [0])
    return RoleSpec(role=role_dir.name, short_description=short, options=options, status=status)


def parse_options(raw: object, where: _Where, depth: int, counter: list[int]) -> tuple[Option, ...]:
    """Parse the ``options`` mapping at ``where``; ``counter`` counts options across the whole file."""
    if raw is None:
        return ()
    if depth > MAX_DEPTH:
        raise where.fail(f"options nested more than {MAX_DEPTH} levels deep")
    options = _mapping(raw, where)
    parsed = []
    for name, body in options.items():
        if not isinstance(name, str) or not name or len(name) > MAX_TEXT:
            raise where.fail(f"option names must be non-empty strings, got {_short(name)}")
        counter[0] += 1
        if counter[0] > MAX_OPTIONS:
            raise where.fail(f"more than {MAX_OPTIONS} options in one file")
        parsed.append(_parse_option(name, body, where.child(name), depth, counter))
    return tuple(parsed)


def _parse_option(name: str, raw: object, where: _Where, depth: int, counter: list[int]) -> Option:
    body = _mapping(raw if raw is not None else {}, where)
    unknown = sorted(str(k) for k in body if k not in _USED_KEYS | _ANSIBLE_ONLY_KEYS)
    if unknown:
        raise where.child(unknown[0]).fail("not a key of Ansible's argument specs")
    type_ = _type(body.get("type", "str"), where.child("type"))
    elements = body.get("elements")
    if elements is not None:
        elements = _type(elements, where.child("elements"))
        if type_ != "list":
            raise where.child("elements").fail(f"only a list has elements, this option is {type_}")
    required = body.get("required", False)
    if not isinstance(required, bool):
        raise where.child("required").fail(f"must be true or false, got {_short(required)}")
    has_default = "default" in body and body["default"] is not None
    default = _json_value(body.get("default"), where.child("default"), 0, [0]) if has_default else None
    if required and has_default:
        raise where.fail("an option cannot be both required and have a default (Ansible refuses it too)")
    choices = _choices(body.get("choices"), where.child("choices"))
    sub = body.get("options")
    if sub is not None and not (type_ == "dict" or (type_ == "list" and elements == "dict")):
        raise where.child("options").fail("only a dict, or a list with elements: dict, has options")
    return Option(
        name=name,
        type=type_,
        description=_description(body.get("description"), where.child("description")),
        required=required,
        has_default=has_default,
        default=default,
        choices=choices,
        elements=elements,
        options=parse_options(sub, where.child("options"), depth + 1, counter),
    )


def _choices(raw: object, where: _Where) -> tuple[Any, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw or len(raw) > MAX_CHOICES:
        raise where.fail(f"must be a list of 1 to {MAX_CHOICES} values")
    for i, choice in enumerate(raw):
        if not isinstance(choice, _JSON_SCALARS) or choice is None or _bad_float(choice):
            raise where.child(str(i)).fail(f"must be a string, number or boolean: {_short(choice)}")
    return tuple(raw)


class _Where:
    """A position in a file, for error messages: the file and the dotted path of keys."""

    def __init__(self, path: Path, keys: str) -> None:
        self.path, self.keys = path, keys

    def child(self, key: str) -> _Where:
        key = key if len(key) <= 64 else key[:61] + "..."
        return _Where(self.path, f"{self.keys}.{key}" if self.keys else key)

    def fail(self, problem: str) -> ArgumentSpecError:
        return ArgumentSpecError(f"{self.path}: {self.keys or 'top level'}: {problem}")


def _first_file(directory: Path, stem: str) -> Path | None:
    for suffix in (".yml", ".yaml"):
        if (directory / (stem + suffix)).is_file():
            return directory / (stem + suffix)
    return None


def _read_yaml(path: Path) -> object:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ArgumentSpecError(f"{path}: {size} bytes, more than the {MAX_FILE_BYTES} a role's meta file may have")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ArgumentSpecError(f"{path}: cannot read: {exc}") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ArgumentSpecError(f"{path}: not valid YAML: {exc}") from exc
    except RecursionError as exc:
        raise ArgumentSpecError(f"{path}: nested too deeply to read") from exc


def _mapping(raw: object, where: _Where) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise where.fail(f"must be a mapping, got {type(raw).__name__}")
    return raw


def _type(raw: object, where: _Where) -> str:
    if not isinstance(raw, str) or raw not in TYPES:
        raise where.fail(f"not one of Ansible's types ({', '.join(sorted(TYPES))}): {_short(raw)}")
    return raw


def _description(raw: object, where: _Where) -> str:
    """Ansible's description: a string or a list of paragraphs; returned as one line of text."""
    paragraphs = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else None
    if raw is None:
        return ""
    if paragraphs is None or not all(isinstance(p, str) and len(p) <= MAX_TEXT for p in paragraphs):
        raise where.fail(f"must be a string or a list of strings of at most {MAX_TEXT} characters each")
    return " ".join(" ".join(p.split()) for p in paragraphs if p.strip())


def _json_value(value: object, where: _Where, depth: int, nodes: list[int]) -> Any:
    """A default must be JSON the API server can store: no dates, no NaN, bounded depth and size (YAML
    aliases can make a small file a huge value)."""
    nodes[0] += 1
    if depth > MAX_DEPTH or nodes[0] > MAX_OPTIONS:
        raise where.fail(f"nested more than {MAX_DEPTH} levels deep or more than {MAX_OPTIONS} values")
    if isinstance(value, _JSON_SCALARS) and not _bad_float(value):
        return value
    if isinstance(value, list):
        return [_json_value(v, where, depth + 1, nodes) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _json_value(v, where, depth + 1, nodes) for k, v in value.items()}
    raise where.fail(f"not a JSON value: {_short(value)}")


def _bad_float(value: object) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
