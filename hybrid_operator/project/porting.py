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
3. a template inside a conditional;
4. (not a porting pitfall, but one ``check`` is the place for) a ``register`` or ``set_fact`` name a spec key
   could take: extra vars beat both, so a custom resource could replace a task's result with its own value.
5. (the page's section 6) a Jinja test (``x is number``, ``x is string``...) on a variable nothing in the
   project defines: 2.18 answered false for an undefined variable, 2.19+ fails the run (kubev2v/forklift's
   operator met it in a deployment template); looked for in conditionals, templated strings and the roles'
   ``templates/``.

What the text does not say is not guessed: a variable from the custom resource's spec, or one whose
definition is itself unknown, is never warned about (``jinjakinds.Kind.UNKNOWN``), except by the page's
pitfall 6, whose point is exactly a spec field the resource may leave out; a name the project ever tests
with ``is defined``/``is undefined`` or gives a ``default(...)`` is taken as handled wherever it is used.
Files are read with the bounds of ``settings.yamlfiles``; a file that is not YAML is reported once and
skipped.
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
SHADOWED = Pitfall("A spec key beats a registered variable", "5-a-spec-key-beats-a-registered-variable")
UNDEFINED_TEST = Pitfall("A test on an undefined variable fails", "6-a-test-on-an-undefined-variable-fails")
PITFALLS = (CONDITIONAL, NUMBERS, TEMPLATED_CONDITIONAL, SHADOWED, UNDEFINED_TEST)


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
_INCLUDE_VARS = frozenset({"include_vars", "ansible.builtin.include_vars", "ansible.legacy.include_vars"})
# Tests that are about definedness itself: the only ones 2.19+ applies to an undefined variable.
_DEFINEDNESS_TESTS = frozenset({"defined", "undefined"})
# Variables every run has without the project defining them: Ansible's magic variables and template globals
# (the ``ansible_*`` ones, and the operator's ``_<group>_<kind>``, are matched by prefix), Jinja's own names.
_GIVEN = frozenset(
    {
        "hostvars", "groups", "group_names", "inventory_hostname", "inventory_hostname_short", "inventory_dir",
        "inventory_file", "playbook_dir", "play_hosts", "role_name", "role_names", "role_path", "role_uuid",
        "item", "omit", "environment", "lookup", "query", "q", "now", "range", "dict", "lipsum", "cycler",
        "joiner", "namespace", "undef", "loop", "varargs", "kwargs", "caller", "self", "super", "vars",
        "true", "false", "none", "True", "False", "None",
    }
)  # fmt: skip
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
        """(variable files, task files, playbooks), each sorted, at most ``MAX_FILES`` in all (with templates)."""
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
        if len(total) + len(self.templates()) > MAX_FILES:
            raise ConfigError(f"the project has over {MAX_FILES} YAML files and templates in its roles: not checked")
        return var_files, task_files, sorted(self.playbooks)

    def templates(self) -> list[Path]:
        """Every file under the roles' ``templates/`` (what the ``template`` module and lookup render)."""
        return [p for role in sorted(self.roles) for p in sorted((role / "templates").rglob("*")) if p.is_file()]


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
    _learn_more(checker, scope, task_files, documents)
    templates = {path: checker.template(path) for path in scope.templates()}
    for path in [*var_files, *task_files, *playbooks]:
        checker.scan_strings(documents[path], path)
    for path in task_files:
        checker.tasks(_tasks(documents[path]), path)
    for path in playbooks:
        checker.tasks(_play_tasks(documents[path], None, path), path)
    for path, tree in templates.items():
        if tree is not None:
            checker.undefined_tests(tree, path, 0)
    checker.report_undefined_tests()
    checker.shadowable()
    return sorted(set(checker.findings))


def _learn_more(checker: _Checker, scope: Scope, task_files: list[Path], documents: Mapping[Path, Node | None]) -> None:
    """What else defines a variable for pitfall 6: ``include_vars`` files (a playbook's are not read: any name
    may then be defined), spec fields the CRD defaults."""
    for path in _include_vars(task_files, documents):
        checker.included(path)
    for playbook in scope.playbooks:
        if any(_INCLUDE_VARS & fields.keys() for _play, fields in _play_tasks(documents.get(playbook), None, playbook)):
            checker.unknown_definitions = True
    for role in scope.roles:
        checker.spec_defaults(role / "meta" / "argument_specs.yml")


class _Checker:
    def __init__(self, shown: Path) -> None:
        self.shown = shown
        self.known: dict[str, Kind] = {}
        self.defined: dict[str, str] = {}  # name -> file:line of its first definition
        self.results: dict[str, tuple[Path, int, str]] = {}  # register / set_fact name -> where, and which
        self.findings: list[Finding] = []
        # Pitfall 6: each test on a variable, kept until every file has been read (a name is handled when any
        # file of the project tests it for definedness, gives it a default or defines it).
        self.tested: list[tuple[Path, int, str, str]] = []  # (file, line, variable, the test as written)
        self.handled: set[str] = set()  # names the project guards (`is defined`, `default(...)`)
        self.unknown_definitions = False  # an include_vars of a file not found: any name may be defined

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
                for name, value in _pairs(fields[action]):
                    if name != "cacheable":
                        self.results.setdefault(name, (path, value.start_mark.line + 1, "set_fact"))
            for name in _free_form_names(fields):
                self.define(name, Kind.UNKNOWN)
            register = fields.get("register")
            if isinstance(register, ScalarNode):
                self.results.setdefault(register.value, (path, register.start_mark.line + 1, "register"))
                if register.value not in self.known:
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
            whole = jinjakinds.parse_template("{{ " + item.value + " }}")
            if whole is not None:
                self.undefined_tests(whole, path, line)
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
            if "{{" not in scalar.value and "{%" not in scalar.value:
                continue
            tree = jinjakinds.parse_template(scalar.value)
            if tree is not None:
                self.undefined_tests(tree, path, scalar.start_mark.line + 1)
            for expr in jinjakinds.expressions(scalar.value):
                mixed = jinjakinds.mixed_plus(expr, self.known)
                if mixed is not None:
                    message = (
                        f"`{jinjakinds.source(mixed)}` adds a string and a number: text on 2.18, a TypeError on 2.19+;"
                        " join with `~`, or convert with `| string` / `| int`"
                    )
                    self.add(path, scalar.start_mark.line + 1, message, NUMBERS)

    def template(self, path: Path) -> nodes.Template | None:
        """A role's template file, parsed (a note when it cannot be read or parsed: not checked)."""
        try:
            text = yamlfiles.read_text(path, what="template")
        except ConfigError as exc:
            self.findings.append(Finding(self._name(path), 1, f"not checked: {str(exc)[:200]}", None))
            return None
        tree = jinjakinds.parse_template(text)
        if tree is None:
            self.findings.append(Finding(self._name(path), 1, "not checked: Jinja cannot parse it", None))
        return tree

    def included(self, path: Path | None) -> None:
        """The names an ``include_vars`` file defines; a file not found means any name may be defined."""
        document = self.read(path) if path is not None else None
        if path is None or document is None:
            self.unknown_definitions = True
            return
        self.variables(document, path)

    def spec_defaults(self, path: Path) -> None:
        """Spec fields with a default in the role's argument spec: ``generate crds`` writes that default into
        the CRD, so the API server gives every object the field."""
        if not path.is_file():
            return
        node = self.read(path)
        main = dict(_pairs(dict(_pairs(node)).get("argument_specs"))).get("main")
        for name, option in _pairs(dict(_pairs(main)).get("options")):
            if "default" in dict(_pairs(option)):
                self.define(name, Kind.UNKNOWN)

    def undefined_tests(self, tree: nodes.Node, path: Path, line: int) -> None:
        """Note each test on a variable in ``tree`` (decided once every file is read), and the names it guards.
        ``line``: the YAML scalar the template is in; 0 for a template file, whose own line numbers count."""
        local = {n.name for n in tree.find_all(nodes.Name) if n.ctx in ("store", "param")}
        for default in tree.find_all(nodes.Filter):
            root = _root_name(default.node)
            if root is not None and default.name.removeprefix("ansible.builtin.") in ("default", "d", "mandatory"):
                self.handled.add(root)
        for test in tree.find_all(nodes.Test):
            root = _root_name(test.node)
            if root is None or root in local:
                continue
            if test.name in _DEFINEDNESS_TESTS:
                self.handled.add(root)
                continue
            self.tested.append((path, line or test.lineno, root, f"{jinjakinds.source(test.node)} is {test.name}"))

    def report_undefined_tests(self) -> None:
        if self.unknown_definitions:
            return
        for path, line, name, written in self.tested:
            if name in self.known or name in self.handled or name in _GIVEN or name.startswith(("ansible_", "_")):
                continue
            message = (
                f"`{written}`: nothing in the project defines `{name}` (defaults/, vars/, set_fact, register, "
                "watches.yaml vars); when the resource's spec leaves it out, 2.18 read the test as false and "
                f"2.19+ fails the run: test `{name} is defined` first, or give it a default in defaults/"
            )
            self.add(path, line, message, UNDEFINED_TEST)

    def shadowable(self) -> None:
        """Every ``register`` and ``set_fact`` name a spec key could take: extra vars beat both, so a custom
        resource with that key (``result``, or ``Result`` snake-cased) would hand the role its own value
        where the task's result belongs. Names starting with ``_`` are safe: admission refuses such keys."""
        for name, (path, line, how) in sorted(self.results.items()):
            if name.startswith("_") or not name.isidentifier():
                continue
            message = (
                f"{how} {name!r}: a spec key {name!r} would override it (extra vars beat {how}), handing the role "
                f"the resource's value instead; name it with a leading '_' (e.g. '_{name}'), which no spec key may take"
            )
            self.add(path, line, message, SHADOWED)

    def add(self, path: Path, line: int, message: str, pitfall: Pitfall) -> None:
        self.findings.append(Finding(self._name(path), line, message, pitfall))

    def _name(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.shown.resolve()))
        except ValueError:
            return str(path)


def _free_form_names(fields: Mapping[str, Node]) -> Iterator[str]:
    """Names a task defines that ``learn`` reads no kind of: ``set_fact: a=1 b={{ x }}`` and a loop's
    ``loop_control.loop_var`` (for pitfall 6, where only being defined counts)."""
    for action in _SET_FACT & fields.keys():
        if isinstance(fields[action], ScalarNode):
            yield from (word.split("=", 1)[0] for word in str(fields[action].value).split() if "=" in word)
    loop_var = dict(_pairs(fields.get("loop_control"))).get("loop_var")
    if isinstance(loop_var, ScalarNode):
        yield str(loop_var.value)


def _root_name(node: nodes.Node | None) -> str | None:
    """The variable an expression starts from: ``x`` of ``x``, ``x.a``, ``x['a'][0]``; None for anything else."""
    while isinstance(node, nodes.Getattr | nodes.Getitem):
        node = node.node
    return node.name if isinstance(node, nodes.Name) and node.ctx == "load" else None


def _include_vars(task_files: list[Path], documents: Mapping[Path, Node | None]) -> Iterator[Path | None]:
    """Each ``include_vars`` of the task files: the file it names, found as Ansible would look in the role
    (``vars/``, then beside the task file), or None when its name is a template or a directory."""
    for path in task_files:
        role = path.parent.parent if path.parent.name in ("tasks", "handlers") else path.parent
        for _task, fields in _tasks(documents[path]):
            for action in _INCLUDE_VARS & fields.keys():
                args = fields[action]
                name = args.value if isinstance(args, ScalarNode) else None
                file_node = dict(_pairs(args)).get("file")
                if isinstance(file_node, ScalarNode):
                    name = file_node.value
                found = None
                if isinstance(name, str) and name and "{" not in name and " " not in name.strip():
                    candidates = [role / "vars" / name, path.parent / name, role / name]
                    found = next((c for c in candidates if c.is_file()), None)
                yield found


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
            if "vars_files" in fields:  # their names are not read: pitfall 6 cannot say what is undefined
                checker.unknown_definitions = True
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
