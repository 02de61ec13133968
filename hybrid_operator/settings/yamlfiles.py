"""YAML files the operator reads at start-up, read with bounds before anything else sees them.

Called by ``watches`` for watches.yaml and for the playbooks it names, and by ``reactor.oneshot`` for the
custom resource file of ``reconcile FILE``. A file is refused, with a ``ConfigError`` saying which bound it
broke, when it is

* larger than a size limit (checked before reading, so a 50 MB file costs a ``stat``),
* not UTF-8 (the error gives the byte offset),
* nested deeper than a depth limit (a deep YAML would otherwise exhaust the recursion of the parser),
* using anchors or aliases (``&a`` / ``*a``): a few lines of aliases expand to a billion values, the
  "billion laughs", and operator-sdk's watches.yaml files do not use them,
* repeating a key in one mapping (YAML says that is an error; PyYAML keeps the last one silently),
* or using a tag that builds something other than JSON's types (``!!set``, ``!!binary``, ``!!python/...``).

Those refusals name the path to the node (``[0].vars.lol``) besides the line, so ``watches`` can name the
entry and field.
Dates stay strings, as they do in operator-sdk (Go's YAML only makes a time out of one for a time field).
The parsing uses libyaml when PyYAML has it, with our own Python composer on top for the checks.
"""

from __future__ import annotations

import gc
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent, MappingStartEvent, ScalarEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.resolver import Resolver

from hybrid_operator.errors import ConfigError

MAX_BYTES = 1 << 20  # 1 MiB: a watches.yaml with a hundred kinds is some tens of KiB
MAX_DEPTH = 64  # levels of nested lists and mappings; real files use fewer than ten
# Playbooks nest deeper than watches.yaml (plays, blocks, module arguments), but not this deep. The bound
# also keeps the scan linear: YAML scanners track open flow collections per token, so text of nothing
# but "[" would take time growing with the square of its length.
PLAYBOOK_MAX_DEPTH = 2 * MAX_DEPTH
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"  # libyaml's own limit, 1,000 levels (PyYAML >= 6.0.4)
_T = TypeVar("_T")

_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"
# Explicit tags that build JSON's types (None: no tag; "!": the non-specific tag of a quoted scalar).
_ALLOWED_TAGS = {None, "!"} | {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")}


def read_text(path: Path, *, limit: int = MAX_BYTES, what: str = "file") -> str:
    """The file's text, refused when it is over ``limit`` bytes or not UTF-8."""
    try:
        with path.open("rb") as stream:
            info = os.fstat(stream.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size > limit:
                raise ConfigError(f"{path}: {what} is {info.st_size} bytes, over the limit of {_size(limit)}")
            data = stream.read(limit + 1)  # a device or pipe has no size: read one byte past the limit
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise ConfigError(f"{path}: {what} is over the limit of {_size(limit)}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {what} is not UTF-8 text (byte offset {exc.start}: {exc.reason})") from exc
    return text.removeprefix("\ufeff")


class YamlError(ConfigError):
    """A YAML file refused: why, where (line and column), and for a refusal by the checks above also the
    path of keys and indexes to the node (``(0, "vars", "lol")``) and the scalar fields of the top-level
    list item it is in, so the caller can name an entry and field."""

    def __init__(
        self,
        source: Path,
        problem: str,
        where: str = "",
        path: tuple[str | int, ...] = (),
        item: dict[str, str] | None = None,
    ) -> None:
        self.source, self.problem, self.where, self.path, self.item = source, problem, where, path, item or {}
        lead = f"{source}: " if path else f"{source}: not valid YAML: "  # a path: refused by a check above
        at = f" at {_one_line(render_path(path), 120)}" if path else ""
        super().__init__(f"{lead}{where + ': ' if where else ''}{problem}{at}")


def render_path(path: tuple[str | int, ...]) -> str:
    """``("selector", "matchExpressions", 0, "key")`` -> ``selector.matchExpressions[0].key``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{_one_line(part, 60)}" if out else _one_line(part, 60)
    return out


def load(text: str, *, source: Path, max_depth: int = MAX_DEPTH) -> Any:
    """Parse one YAML document with the checks above; a problem becomes a one-line ``YamlError``."""

    def read(part: str) -> Any:
        loader = _Loader(part, max_depth)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()

    with _parsing(source):
        return _below_libyamls_limit(read, text)


def load_documents(text: str, *, source: Path, max_depth: int = MAX_DEPTH) -> list[Any]:
    """Every document of a ``---`` separated stream, each with the checks above; empty ones are None.

    For a file people write as they write for ``kubectl apply -f``, where a leading or trailing ``---`` is
    common. The checks hold across documents: an anchor in one is refused before any alias can use it.
    """

    def read(part: str) -> list[Any]:
        loader = _Loader(part, max_depth)
        try:
            documents = []
            while loader.check_node():
                documents.append(loader.construct_document(loader.get_node()))
            return documents
        finally:
            loader.dispose()

    with _parsing(source):
        return _below_libyamls_limit(read, text)


def _below_libyamls_limit(read: Callable[[str], _T], text: str) -> _T:
    """``read(text)``; where libyaml stopped at its own nesting limit, the refusal of our depth check.

    libyaml (in PyYAML's wheels since 6.0.4) refuses more than 1,000 nested levels while it scans ahead,
    before the composer has seen level ``max_depth + 1`` and could name its path. The text up to where
    libyaml stopped starts with the same too-deep nesting, so reading it again raises our refusal, with
    the path and position of the first level too deep. Never returns data read from the shortened text.
    """
    try:
        return read(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        if mark is None or _LIBYAML_TOO_DEEP not in str(exc.problem):
            raise
        lines = text.splitlines(keepends=True)
        cut = sum(len(line) for line in lines[: mark.line]) + mark.column
        try:
            read(text[:cut])
        except _Refused:
            raise
        except yaml.YAMLError:
            pass
        raise


@contextmanager
def _parsing(source: Path) -> Iterator[None]:
    """Around a parse: the collector paused, and every error of the parser one ``YamlError``."""
    # Parsing makes many small objects and no garbage cycles; the cyclic collector's passes over them
    # would more than double the time of a large file, so it waits until the document is built.
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    except _Refused as exc:
        raise YamlError(source, exc.problem, _at(exc.mark), exc.path, exc.item) from exc
    except yaml.MarkedYAMLError as exc:
        raise YamlError(source, *_describe(exc)) from exc
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: text libyaml cannot encode (lone surrogates)
        raise YamlError(source, _one_line(str(exc))) from exc
    finally:
        if collecting:
            gc.enable()


def playbook_problem(text: str) -> str | None:
    """Why ``text`` is not an Ansible playbook, or None when it looks like one.

    A playbook is one YAML document: a non-empty list of plays (mappings with ``hosts``, which Ansible
    requires) or ``import_playbook`` entries. Read from the event stream, without building the document,
    so a playbook's own anchors or tags (``!unsafe``, ``!vault``) cost nothing and need no constructor.
    """
    try:
        return _PlaybookShape().read(yaml.parse(text, Loader=_EventLoader))
    except yaml.MarkedYAMLError as exc:
        if _LIBYAML_TOO_DEEP in str(exc.problem):  # 1,000 levels, far past ours
            return f"nested deeper than {PLAYBOOK_MAX_DEPTH} levels"
        problem, where = _describe(exc)
        return f"not valid YAML: {where}: {problem}" if where else f"not valid YAML: {problem}"
    except (yaml.YAMLError, ValueError) as exc:
        return f"not valid YAML: {_one_line(str(exc))}"


# -- the loader ----------------------------------------------------------------------------------------


class _Refused(yaml.YAMLError):
    def __init__(self, problem: str, mark: Any, path: tuple[str | int, ...], item: dict[str, str]) -> None:
        super().__init__(problem)
        self.problem, self.mark, self.path, self.item = problem, mark, path, item


class _BoundedComposer(Composer):
    """PyYAML's composer, refusing anchors, aliases, nesting deeper than ``max_depth``, tags beyond JSON's
    types and duplicate keys; it knows the path to the node it composes, for the error."""

    max_depth = MAX_DEPTH
    peek_event: Callable[[], Any]  # from the parser it is mixed with

    def __init__(self) -> None:
        super().__init__()
        self._stack: list[tuple[Node | None, Any]] = []  # (parent, index) of each collection being composed

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        if isinstance(event, AliasEvent) or event.anchor is not None:
            raise self._refuse("anchors and aliases (&name, *name) are not allowed", event, parent, index)
        if getattr(event, "tag", None) not in _ALLOWED_TAGS:
            raise self._refuse(f"tag {event.tag} is not allowed (JSON's types only)", event, parent, index)
        if not isinstance(event, SequenceStartEvent | MappingStartEvent):
            return super().compose_node(parent, index)
        if len(self._stack) >= self.max_depth:
            raise self._refuse(f"nested deeper than {self.max_depth} levels", event, parent, index)
        self._stack.append((parent, index))
        try:
            node = super().compose_node(parent, index)
            if isinstance(node, MappingNode):
                self._check_keys(node)
            return node
        finally:
            self._stack.pop()

    def _check_keys(self, node: MappingNode) -> None:
        seen: set[tuple[str, str]] = set()
        for key, _ in node.value:
            if isinstance(key, ScalarNode) and key.tag != _MERGE:
                if (key.tag, key.value) in seen:
                    raise self._refuse(f"duplicate key {key.value!r:.60}", key, node, key)
                seen.add((key.tag, key.value))

    def _refuse(self, problem: str, at: Any, parent: Node | None, index: Any) -> _Refused:
        frames = [*self._stack, (parent, index)]
        path = tuple(_segment(i) for p, i in frames if p is not None)
        item: dict[str, str] = {}
        if len(frames) > 2 and isinstance(frames[2][0], MappingNode):  # the top-level item, being composed
            pairs = frames[2][0].value
            item = {k.value: v.value for k, v in pairs if isinstance(k, ScalarNode) and isinstance(v, ScalarNode)}
        return _Refused(problem, at.start_mark, path, item)


def _segment(index: Any) -> str | int:
    if isinstance(index, int):
        return index
    return str(index.value) if isinstance(index, ScalarNode) else "<key>"


class _Resolver(Resolver):
    """YAML 1.1's implicit types, less timestamps: ``2024-01-01`` stays the string operator-sdk sees."""


_Resolver.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP]
    for first, resolvers in Resolver.yaml_implicit_resolvers.items()
}


class _Constructor(SafeConstructor):
    """PyYAML's safe construction, every error a YAMLError with its line."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # PyYAML's own bugs on odd input: `!!int` of 5,000 digits, `!!int ""`
            raise ConstructorError(
                None, None, f"cannot read {node.tag}: {_one_line(str(exc))}", node.start_mark
            ) from exc


if yaml.__with_libyaml__:  # libyaml's scanner and parser are many times faster than PyYAML's
    from yaml._yaml import CParser as _Parser

    class _Loader(_BoundedComposer, _Parser, _Constructor, _Resolver):
        def __init__(self, text: str, max_depth: int) -> None:
            _Parser.__init__(self, text)
            _BoundedComposer.__init__(self)
            _Constructor.__init__(self)
            _Resolver.__init__(self)
            self.max_depth = max_depth

    _EventLoader: type = yaml.CBaseLoader
else:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Loader(Reader, Scanner, Parser, _BoundedComposer, _Constructor, _Resolver):  # type: ignore[no-redef]
        def __init__(self, text: str, max_depth: int) -> None:
            Reader.__init__(self, text)
            Scanner.__init__(self)
            Parser.__init__(self)
            _BoundedComposer.__init__(self)
            _Constructor.__init__(self)
            _Resolver.__init__(self)
            self.max_depth = max_depth

    _EventLoader = yaml.BaseLoader


# -- the playbook check --------------------------------------------------------------------------------

_IMPORTS = {"import_playbook", "ansible.builtin.import_playbook", "ansible.legacy.import_playbook"}


class _PlaybookShape:
    """Walks parser events: depth 1 is the list of plays, depth 2 the keys and values of one play."""

    def __init__(self) -> None:
        self.depth = 0
        self.documents = 0
        self.plays = 0
        self.position = 0  # index of the current event inside the current play mapping
        self.keys: set[str] = set()

    def read(self, events: Any) -> str | None:
        for event in events:
            problem = self.step(event)
            if problem:
                return problem
        if self.documents == 0 or self.plays == 0:
            return "empty: a playbook is a list of plays"
        return None

    def step(self, event: yaml.Event) -> str | None:
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            return "more than one YAML document" if self.documents > 1 else None
        if isinstance(event, yaml.CollectionEndEvent):
            self.depth -= 1
            if self.depth == 1 and not self.keys & ({"hosts"} | _IMPORTS):
                return f"play {self.plays} has neither 'hosts' nor 'import_playbook'"
            return None
        if not isinstance(event, yaml.NodeEvent):
            return None
        problem = self.node(event)
        if isinstance(event, yaml.CollectionStartEvent):
            self.depth += 1
            if self.depth > PLAYBOOK_MAX_DEPTH:
                return f"nested deeper than {PLAYBOOK_MAX_DEPTH} levels"
        return problem

    def node(self, event: yaml.NodeEvent) -> str | None:
        if self.depth == 0 and not isinstance(event, yaml.SequenceStartEvent):
            return "not a list of plays"
        if self.depth == 1:
            if isinstance(event, AliasEvent):  # the same play again: its keys were checked the first time
                self.plays += 1
                return None
            if not isinstance(event, yaml.MappingStartEvent):
                return f"play {self.plays + 1} is not a mapping"
            self.plays += 1
            self.position, self.keys = 0, set()
        elif self.depth == 2:
            if self.position % 2 == 0 and isinstance(event, ScalarEvent):
                self.keys.add(event.value)
            self.position += 1
        return None


# -- messages ------------------------------------------------------------------------------------------


def _describe(exc: yaml.MarkedYAMLError) -> tuple[str, str]:
    """("did not find expected ',' (while parsing a flow sequence at line 5, column 9)", "line 6, column 7")."""
    problem, context = exc.problem, exc.context
    where = _at(exc.problem_mark) if problem else _at(exc.context_mark)
    text = problem or context or "syntax error"
    if problem and context:
        since = _at(exc.context_mark)
        text += f" ({context} at {since})" if since and since != where else f" ({context})"
    return _one_line(text), where


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"
