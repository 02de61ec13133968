"""``hybrid-operator check``: what it can see, statically, of the ansible-core 2.18 -> 2.19+ pitfalls.

Called by ``cli`` with the roles and playbooks watches.yaml names (and the roles beside them). Roles
written for operator-sdk's image (ansible-core 2.18) may fail on 2.19 and later, where templates keep
their native types and conditionals must be booleans; the docs' porting page lists the pitfalls, and this
module finds the ones a role's text shows, one ``Finding`` per place, each naming its section there:

1. a conditional (``when``, ``changed_when``, ``failed_when``, ``until``, ``assert``'s ``that``) whose
   value is not a boolean: a lookup, a string default, a registered result, a number, or a variable the
   role defines as one of those (``defaults/``, ``vars/``, ``vars:``, ``set_fact``, ``register``);
2. a template that now renders a number where the API wants a string (a ConfigMap's ``data``, a
   Secret's ``stringData``, labels, annotations, an env var's ``value``, in a ``k8s`` task's
   definition), and a ``+`` between a string and a number anywhere;
3. a template inside a conditional.

What the text does not say is not guessed: a variable from the custom resource's spec, or one whose
definition is itself unknown, is never warned about (``jinjakinds.Kind.UNKNOWN``). Files are read with
the bounds of ``settings.yamlfiles``; a file that is not YAML is reported once and skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jinja2 import nodes
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from hybrid_operator.errors import ConfigError
from hybrid_operator.project import jinjakinds
from hybrid_operator.project.jinjakinds import NOT_BOOLEAN, Kind
from hybrid_operator.settings import yamlfiles

# The page each finding names a section of: the docs site's porting page (mkdocs.yml's site_url), whose source
# is docs/roles/porting.md; tests/unit/docs/test_site.py checks every anchor against the built site.
PAGE = "https://hybrid-operator.dev/roles/porting/"
SOURCE = "docs/roles/porting.md"
MAX_FILES = 2000  # YAML files read per check: a project with more is not one this check was made for
MAX_SHOWN = 500  # findings printed; the rest are counted


@dataclass(frozen=True)
class Pitfall:
    title: str
    anchor: str  # the section of the porting page (its heading's anchor)


CONDITIONAL = Pitfall("A conditional must be a boolean", "1-a-conditional-must-be-a-boolean")
NUMBERS = Pitfall("Numbers stay numbers", "2-numbers-stay-numbers")
TEMPLATED_CONDITIONAL = Pitfall("No templates inside conditionals", "3-no-templates-inside-conditionals")
PITFALLS = (CONDITIONAL, NUMBERS, TEMPLATED_CONDITIONAL)


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    message: str
    pitfall: Pitfall | None = field(compare=False)  # None: the file could not be checked

    def render(self) -> str:
        where = f" ({PAGE}#{self.pitfall.anchor})" if self.pitfall else ""
        return f"{self.path}:{self.line}: {self.message}{where}"


_CONDITIONALS = ("when", "changed_when", "failed_when", "until")
_ASSERT = frozenset({"assert", "ansible.builtin.assert", "ansible.legacy.assert"})
_SET_FACT = frozenset({"set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact"})
_BLOCKS = ("block", "rescue", "always")
_PLAY_TASKS = ("pre_tasks", "tasks", "post_tasks", "handlers")
_TAGS = {
    "tag:yaml.org,2002:bool": Kind.BOOL,
    "tag:yaml.org,2002:int": Kind.NUMBER,
    "tag:yaml.org,2002:float": Kind.NUMBER,
    "tag:yaml.org,2002:seq": Kind.LIST,
    "tag:yaml.org,2002:map": Kind.DICT,
}


@dataclass
class Scope:
    """What one check reads: role directories, playbooks, and the variables watches.yaml passes."""

    roles: set[Path] = field(default_factory=set)
    playbooks: set[Path] = field(default_factory=set)
    watch_vars: dict[str, Any] = field(default_factory=dict)

    def files(self) -> tuple[list[Path], list[Path], list[Path]]:
        """(variable files, task files, playbooks), each sorted, at most ``MAX_FILES`` in all."""
        var_files: list[Path] = []
        task_files: list[Path] = []
        for role in sorted(self.roles):
            for sub, into in (
                ("defaults", var_files),
                ("vars", var_files),
                ("tasks", task_files),
                ("handlers", task_files),
            ):
                into.extend(p for p in sorted((role / sub).rglob("*")) if p.suffix in (".yml", ".yaml") and p.is_file())
        total = var_files + task_files + sorted(self.playbooks)
        if len(total) > MAX_FILES:
            raise ConfigError(f"the project has over {MAX_FILES} YAML files in its roles: not checked")
        return var_files, task_files, sorted(self.playbooks)


def check(scope: Scope, shown: Path | None = None) -> list[Finding]:
    """Every finding in the scope's files, sorted by file and line; paths relative to ``shown``."""
    checker = _Checker(shown or Path.cwd())
    var_files, task_files, playbooks = scope.files()
    for name, value in scope.watch_vars.items():
        checker.define(str(name), _python_kind(value))
    documents = {path: checker.read(path) for path in [*var_files, *task_files, *playbooks]}
    for path in var_files:  # the variables first: every later file may use them
        checker.variables(documents[path], path)
    for path in task_files:
        checker.learn(_tasks(documents[path]), path)
    for path in playbooks:
        checker.learn(_play_tasks(documents[path], checker, path), path)
    for path in [*var_files, *task_files, *playbooks]:
        checker.scan_strings(documents[path], path)
    for path in task_files:
        checker.tasks(_tasks(documents[path]), path)
    for path in playbooks:
        checker.tasks(_play_tasks(documents[path], None, path), path)
    return sorted(set(checker.findings))


class _Checker:
    def __init__(self, shown: Path) -> None:
        self.shown = shown
        self.known: dict[str, Kind] = {}
        self.defined: dict[str, str] = {}  # name -> file:line of its first definition
        self.findings: list[Finding] = []

    def read(self, path: Path) -> Node | None:
        """The file's one YAML document; a file of several (resource lists a role reads with ``lookup``,
        kept under ``tasks/``) as one sequence of them: its templates are still looked at."""
        text = ""
        try:
            text = yamlfiles.read_text(path, what="YAML file")
            documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        except (ConfigError, yaml.YAMLError, RecursionError) as exc:
            why = str(exc).splitlines()[0][:200]
            if isinstance(exc, yaml.YAMLError) and "{{" in text:
                why = "not YAML before it is rendered (a template the role reads with lookup?)"
            self.findings.append(Finding(self._name(path), 1, f"not checked: {why}", None))
            return None
        if len(documents) == 1:
            return documents[0]
        return SequenceNode("tag:yaml.org,2002:seq", [SequenceNode("tag:yaml.org,2002:seq", documents)])

    def define(self, name: str, kind: Kind, where: str = "") -> None:
        """A variable's kind; defined twice with different kinds, it is unknown."""
        self.known[name] = kind if self.known.get(name, kind) == kind else Kind.UNKNOWN
        if where:
            self.defined.setdefault(name, where)

    def variables(self, node: Node | None, path: Path) -> None:
        for key, value in _pairs(node):
            self.define(key, self.value_kind(value), f"{self._name(path)}:{value.start_mark.line + 1}")

    def value_kind(self, node: Node) -> Kind:
        if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            return _TAGS.get(node.tag, Kind.UNKNOWN)
        expr = jinjakinds.lone_template(node.value)
        return jinjakinds.kind_of(expr, self.known) if expr is not None else Kind.STR

    def learn(self, tasks: Iterable[tuple[Node, Mapping[str, Node]]], path: Path) -> None:
        """Variables the tasks define: ``vars:``, ``set_fact`` and ``register``."""
        for _task, fields in tasks:
            self.variables(fields.get("vars"), path)
            for action in _SET_FACT & fields.keys():
                self.variables(fields[action], path)
            register = fields.get("register")
            if isinstance(register, ScalarNode) and register.value not in self.known:
                self.define(register.value, Kind.RESULT, f"{self._name(path)}:{register.start_mark.line + 1}")

    def tasks(self, tasks: Iterable[tuple[Node, Mapping[str, Node]]], path: Path) -> None:
        for _task, fields in tasks:
            for key in _CONDITIONALS:
                if key in fields:
                    self.conditional(key, fields[key], path)
            for action in _ASSERT & fields.keys():
                that = dict(_pairs(fields[action])).get("that")
                if that is not None:
                    self.conditional("that", that, path)
            for action, args in fields.items():
                if action.rsplit(".", 1)[-1] == "k8s":
                    definition = dict(_pairs(args)).get("definition") or dict(_pairs(args)).get("resource_definition")
                    self.definition(definition, path)

    def conditional(self, key: str, node: Node, path: Path) -> None:
        for item in node.value if isinstance(node, SequenceNode) else [node]:
            if not isinstance(item, ScalarNode) or item.tag != "tag:yaml.org,2002:str":
                continue
            line = item.start_mark.line + 1
            if "{{" in item.value or "{%" in item.value:
                message = f"{key}: a template inside a conditional ({_short(item.value)}): write the expression bare"
                self.add(path, line, message, TEMPLATED_CONDITIONAL)
                continue
            expr = jinjakinds.parse_expression(item.value)
            kind = jinjakinds.kind_of(expr, self.known) if expr is not None else Kind.UNKNOWN
            if expr is not None and kind in NOT_BOOLEAN:
                what = jinjakinds.source(expr)
                name = expr.name if isinstance(expr, nodes.Name) else ""
                origin = f" (set at {self.defined[name]})" if name in self.defined else ""
                message = (
                    f"{key}: `{what}`{origin} is {kind.value}, not a boolean, which 2.19+ refuses "
                    "(say `| bool`, `is ...`, `| length > 0`)"
                )
                self.add(path, line, message, CONDITIONAL)

    def definition(self, node: Node | None, path: Path) -> None:
        """Templated values of a k8s definition that must be strings but now render as numbers or booleans."""
        kind_node = dict(_pairs(node)).get("kind")
        kind = kind_node.value if isinstance(kind_node, ScalarNode) else ""
        stack: list[tuple[Node | None, tuple[str, ...]]] = [(node, ())]
        while stack:
            current, where = stack.pop()
            if isinstance(current, MappingNode):
                stack.extend((value, (*where, key)) for key, value in _pairs(current))
            elif isinstance(current, SequenceNode):
                stack.extend((item, (*where, "[]")) for item in current.value)
            elif isinstance(current, ScalarNode) and _wants_string(where, kind):
                expr = jinjakinds.lone_template(current.value)
                rendered = jinjakinds.kind_of(expr, self.known) if expr is not None else Kind.UNKNOWN
                if rendered in (Kind.NUMBER, Kind.BOOL):
                    field_name = ".".join(where).replace(".[]", "[]")
                    message = (
                        f"{field_name}: {_short(current.value)} renders {rendered.value} on 2.19+ (a string on 2.18), "
                        "and the API server wants a string: end it with `| string`"
                    )
                    self.add(path, current.start_mark.line + 1, message, NUMBERS)

    def scan_strings(self, node: Node | None, path: Path) -> None:
        """Every ``+`` of a string and a number in any templated string of the file."""
        for scalar in _scalars(node):
            if "{{" not in scalar.value:
                continue
            for expr in jinjakinds.expressions(scalar.value):
                mixed = jinjakinds.mixed_plus(expr, self.known)
                if mixed is not None:
                    message = (
                        f"`{jinjakinds.source(mixed)}` adds a string and a number: text on 2.18, a TypeError on 2.19+;"
                        " join with `~`, or convert with `| string` / `| int`"
                    )
                    self.add(path, scalar.start_mark.line + 1, message, NUMBERS)

    def add(self, path: Path, line: int, message: str, pitfall: Pitfall) -> None:
        self.findings.append(Finding(self._name(path), line, message, pitfall))

    def _name(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.shown.resolve()))
        except ValueError:
            return str(path)


def _wants_string(where: tuple[str, ...], kind: str) -> bool:
    if len(where) >= 2 and where[-3:-1] in (("metadata", "labels"), ("metadata", "annotations")):
        return True
    if where[-3:] == ("env", "[]", "value"):
        return True
    return (kind == "ConfigMap" and where[:1] == ("data",) and len(where) == 2) or (
        kind == "Secret" and where[:1] == ("stringData",) and len(where) == 2
    )


def _pairs(node: Node | None) -> Iterator[tuple[str, Node]]:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode):
                yield str(key.value), value


def _scalars(node: Node | None) -> Iterator[ScalarNode]:
    """Every string scalar under ``node`` (keys excluded), each node once (aliases share nodes)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ScalarNode) and current.tag == "tag:yaml.org,2002:str":
            yield current
        elif isinstance(current, MappingNode):
            stack.extend(value for _key, value in current.value)
        elif isinstance(current, SequenceNode):
            stack.extend(current.value)


def _tasks(node: Node | None) -> Iterator[tuple[Node, dict[str, Node]]]:
    """Each task of a task list, blocks opened (a block's own ``when`` is checked as a task's)."""
    stack: list[Node] = list(reversed(node.value)) if isinstance(node, SequenceNode) else []
    seen: set[int] = set()
    while stack:
        task = stack.pop()
        if id(task) in seen or not isinstance(task, MappingNode):
            continue
        seen.add(id(task))
        fields = dict(_pairs(task))
        yield task, fields
        for key in _BLOCKS:
            if isinstance(fields.get(key), SequenceNode):
                stack.extend(reversed(fields[key].value))


def _play_tasks(node: Node | None, checker: _Checker | None, path: Path) -> Iterator[tuple[Node, dict[str, Node]]]:
    """The tasks of every play of a playbook (a play's ``vars`` are learnt when ``checker`` is given)."""
    plays = node.value if isinstance(node, SequenceNode) else []
    for play in plays:
        fields = dict(_pairs(play))
        if checker is not None:
            checker.variables(fields.get("vars"), path)
        yield play, {key: value for key, value in fields.items() if key in _CONDITIONALS}
        for key in _PLAY_TASKS:
            yield from _tasks(fields.get(key))


def _python_kind(value: object) -> Kind:
    if isinstance(value, bool):
        return Kind.BOOL
    if isinstance(value, int | float):
        return Kind.NUMBER
    if isinstance(value, str):
        expr = jinjakinds.lone_template(value)
        return Kind.UNKNOWN if expr is not None else Kind.STR
    return Kind.LIST if isinstance(value, list) else Kind.DICT if isinstance(value, dict) else Kind.UNKNOWN


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")


def scope_of(
    targets: Sequence[tuple[str | None, Path | None]], bases: Iterable[Path], watch_vars: Mapping[str, Any]
) -> Scope:
    """The roles and playbooks to check: each target's, and every role in a ``roles/`` of ``bases`` (the
    watches file's directory) or beside a playbook."""
    scope = Scope(watch_vars=dict(watch_vars))
    dirs = set(bases)
    for role, playbook in targets:
        if role and Path(role).is_dir():
            scope.roles.add(Path(role))
        if playbook is not None and playbook.is_file():
            scope.playbooks.add(playbook)
            dirs.update((playbook.parent, playbook.parent.parent))
    for base in dirs:
        if (base / "roles").is_dir():
            scope.roles.update(_role_dirs(base / "roles"))
    return scope


def _role_dirs(roles: Path) -> Iterator[Path]:
    """Each role under a ``roles/`` directory, and one level further down (``roles/<version>/<role>``, as
    operators that ship a role per version of their product lay them out, reached by ``roles_path``)."""
    for child in sorted(roles.iterdir()):
        if not child.is_dir():
            continue
        if any((child / sub).is_dir() for sub in ("tasks", "defaults", "vars", "handlers", "meta")):
            yield child
        else:
            yield from (grandchild for grandchild in sorted(child.iterdir()) if (grandchild / "tasks").is_dir())
