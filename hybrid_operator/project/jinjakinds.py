"""What a Jinja expression of a role evaluates to, as far as its text says: the type ``porting`` needs.

Called by ``project.porting`` (``hybrid-operator check``) for conditionals, templated values and the
variables a role defines. ansible-core 2.19 and later keep a template's native type (``{{ n + 1 }}`` is an
int, where 2.18 gave the string ``"4"``) and require a conditional to be a boolean; both are decided by
the expression's type, which is known here only when the text alone tells it: a literal, an arithmetic
operation, a filter or test with a known result, a lookup, or a variable whose definition said. Anything
else is ``UNKNOWN`` and never warned about: a variable from the custom resource's spec may be anything.

Parsing only: Jinja's own parser with the extensions Ansible enables; no filter or test is looked up and
nothing is evaluated. An expression Jinja cannot parse is ``UNKNOWN`` (Ansible will say more at run time).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

import jinja2
from jinja2 import nodes


class Kind(Enum):
    BOOL = "a boolean"
    STR = "a string"
    NUMBER = "a number"
    LIST = "a list"
    DICT = "a mapping"
    RESULT = "a registered task result (a mapping)"
    UNKNOWN = "unknown"


NOT_BOOLEAN = frozenset({Kind.STR, Kind.NUMBER, Kind.LIST, Kind.DICT, Kind.RESULT})

# Filters whose result has one type whatever they are given (ansible.builtin's and Jinja's).
_FILTER_KINDS = {
    **dict.fromkeys(("bool",), Kind.BOOL),
    **dict.fromkeys(("int", "float", "length", "count", "abs", "round", "sum", "wordcount"), Kind.NUMBER),
    **dict.fromkeys(
        (
            "string",
            "lower",
            "upper",
            "capitalize",
            "title",
            "trim",
            "join",
            "to_json",
            "to_nice_json",
            "to_yaml",
            "to_nice_yaml",
            "b64encode",
            "b64decode",
            "quote",
            "regex_replace",
            "replace",
            "basename",
            "dirname",
            "hash",
            "checksum",
            "password_hash",
            "comment",
            "center",
            "indent",
            "format",
            "urlencode",
            "truncate",
            "striptags",
            "ansible.builtin.to_json",
            "ansible.builtin.quote",
        ),
        Kind.STR,
    ),
    **dict.fromkeys(
        (
            "list",
            "select",
            "reject",
            "selectattr",
            "rejectattr",
            "map",
            "sort",
            "unique",
            "split",
            "flatten",
            "zip",
            "product",
            "dict2items",
            "batch",
            "slice",
            "difference",
            "union",
            "intersect",
        ),
        Kind.LIST,
    ),
    **dict.fromkeys(("dict", "items2dict", "combine", "from_json", "from_yaml"), Kind.DICT),
}
# Filters that return what they are given, or their default: the kind follows the operand.
_PASS_THROUGH = frozenset({"default", "d", "first", "last", "min", "max", "random", "unsafe", "mandatory"})
_ARITHMETIC = (nodes.Add, nodes.Sub, nodes.Mul, nodes.Div, nodes.FloorDiv, nodes.Mod, nodes.Pow)
_FIXED_KINDS: tuple[tuple[type | tuple[type, ...], Kind], ...] = (
    ((nodes.Compare, nodes.Test, nodes.Not), Kind.BOOL),
    (nodes.Concat, Kind.STR),
    ((nodes.List, nodes.Tuple), Kind.LIST),
    (nodes.Dict, Kind.DICT),
)
_ENVIRONMENT = jinja2.Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])


def parse_expression(text: str) -> nodes.Expr | None:
    """The expression of a conditional (``when: a and b``), or None when it is not one Jinja parses."""
    try:
        body = _ENVIRONMENT.parse("{{ " + text + " }}").body
    except (jinja2.TemplateSyntaxError, RecursionError, ValueError):
        return None
    if len(body) == 1 and isinstance(body[0], nodes.Output) and len(body[0].nodes) == 1:
        expr = body[0].nodes[0]
        return expr if isinstance(expr, nodes.Expr) and not isinstance(expr, nodes.TemplateData) else None
    return None


def parse_template(text: str) -> nodes.Template | None:
    """A whole template (a templated string, or a role's template file), or None when Jinja cannot parse it."""
    try:
        return _ENVIRONMENT.parse(text)
    except (jinja2.TemplateSyntaxError, RecursionError, ValueError):
        return None


def lone_template(text: str) -> nodes.Expr | None:
    """The expression of a value that is one template and nothing else (``"{{ n + 1 }}"``, whose type
    2.19 keeps), or None (plain text, text around the template, several templates: a string anyway)."""
    stripped = text.strip()
    if not (stripped.startswith("{{") and stripped.endswith("}}")) or stripped.count("{{") != 1:
        return None
    return parse_expression(stripped[2:-2])


def expressions(text: str) -> list[nodes.Expr]:
    """Every ``{{ }}`` expression in a templated string (none when Jinja cannot parse it)."""
    try:
        template = _ENVIRONMENT.parse(text)
    except (jinja2.TemplateSyntaxError, RecursionError, ValueError):
        return []
    return [n for out in template.find_all(nodes.Output) for n in out.nodes if not isinstance(n, nodes.TemplateData)]


def kind_of(expr: nodes.Node, known: Mapping[str, Kind]) -> Kind:
    """The type ``expr`` evaluates to on ansible-core 2.19+; ``known``: what the role's variables are."""
    for types, fixed in _FIXED_KINDS:
        if isinstance(expr, types):
            return fixed
    if isinstance(expr, nodes.Const):
        return _const_kind(expr.value)
    if isinstance(expr, nodes.Name):
        return known.get(expr.name, Kind.UNKNOWN)
    if isinstance(expr, nodes.And | nodes.Or):  # Python's and/or: one of the operands, not a boolean
        sides = (kind_of(expr.left, known), kind_of(expr.right, known))
        same = sides[0] if sides[0] == sides[1] else Kind.UNKNOWN
        return next((side for side in sides if side in NOT_BOOLEAN), same)
    if isinstance(expr, _ARITHMETIC):
        return _arithmetic_kind(expr, known)
    if isinstance(expr, nodes.Filter):
        return _filter_kind(expr, known)
    if isinstance(expr, nodes.Call) and isinstance(expr.node, nodes.Name):
        return {"lookup": Kind.STR, "query": Kind.LIST, "q": Kind.LIST}.get(expr.node.name, Kind.UNKNOWN)
    if isinstance(expr, nodes.CondExpr):
        yes = kind_of(expr.expr1, known)
        return yes if expr.expr2 is not None and yes == kind_of(expr.expr2, known) else Kind.UNKNOWN
    return Kind.UNKNOWN


def mixed_plus(expr: nodes.Node, known: Mapping[str, Kind]) -> nodes.Add | None:
    """The first ``+`` in ``expr`` with a string on one side and a number on the other: it concatenated as
    strings on 2.18 (everything templated was text) and raises a TypeError on 2.19+."""
    for add in [*([expr] if isinstance(expr, nodes.Add) else []), *expr.find_all(nodes.Add)]:
        sides = {kind_of(add.left, known), kind_of(add.right, known)}
        if sides == {Kind.STR, Kind.NUMBER}:
            return add
    return None


def source(expr: nodes.Node, limit: int = 60) -> str:
    """A short rendering of an expression for a warning: a name, an attribute path, a call or a filter."""
    text = _render(expr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _render(expr: nodes.Node) -> str:
    if isinstance(expr, nodes.Name):
        return expr.name
    if isinstance(expr, nodes.Getattr):
        return f"{_render(expr.node)}.{expr.attr}"
    if isinstance(expr, nodes.Getitem):
        return f"{_render(expr.node)}[...]"
    if isinstance(expr, nodes.Const):
        return repr(expr.value)
    if isinstance(expr, nodes.Filter) and expr.node is not None:
        return f"{_render(expr.node)} | {expr.name}"
    if isinstance(expr, nodes.Call):
        return f"{_render(expr.node)}(...)"
    if isinstance(expr, nodes.Add):
        return f"{_render(expr.left)} + {_render(expr.right)}"
    return type(expr).__name__.lower()


def _const_kind(value: object) -> Kind:
    if isinstance(value, bool):
        return Kind.BOOL
    if isinstance(value, int | float):
        return Kind.NUMBER
    if isinstance(value, str):
        return Kind.STR
    if isinstance(value, list | tuple):
        return Kind.LIST
    if isinstance(value, dict):
        return Kind.DICT
    return Kind.UNKNOWN


def _arithmetic_kind(expr: nodes.BinExpr, known: Mapping[str, Kind]) -> Kind:
    left, right = kind_of(expr.left, known), kind_of(expr.right, known)
    if Kind.NUMBER in (left, right) and {left, right} <= {Kind.NUMBER, Kind.UNKNOWN}:
        return Kind.NUMBER
    if isinstance(expr, nodes.Add) and left == right and left in (Kind.STR, Kind.LIST):
        return left
    return Kind.UNKNOWN


def _filter_kind(expr: nodes.Filter, known: Mapping[str, Kind]) -> Kind:
    name = expr.name.removeprefix("ansible.builtin.")
    if name in _FILTER_KINDS:
        return _FILTER_KINDS[name]
    if name in _PASS_THROUGH and expr.node is not None:
        operand = kind_of(expr.node, known)
        if name in ("default", "d") and operand == Kind.UNKNOWN and expr.args:
            fallback = kind_of(expr.args[0], known)  # unknown operand: only its default's type is sure
            return fallback if fallback in (Kind.STR, Kind.LIST, Kind.DICT) else Kind.UNKNOWN
        return operand
    return Kind.UNKNOWN
