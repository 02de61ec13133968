"""Compiled Jinja templates kept across runs (``warm.templates``): Ansible's ``AnsibleEnvironment.compile`` and
``compile_expression`` served from a bounded cache of code objects, and ``precompile`` through
``TemplateEngine._compile_template`` / ``_compile_expression`` (compile only: nothing is rendered, so no lookup
runs). The same names in 2.19-2.21; ``template_cache_problems`` checks their shape before ``hook_template_cache``.

What a code object depends on is its key: the source (as plain text; its data tags do not reach the code), the
name, file name and ``defer_init`` Jinja was given, and every setting of the environment Jinja's lexer, parser
and code generator read (the delimiters and whitespace settings, optimizer, autoescape, async, finalize, the
intercepted operators, extensions, the code generator and environment classes), the backslash escaping of
Ansible's compile context and ``ALLOW_EMBEDDED_TEMPLATES``. One thing the code generator reads that is not a
setting: for each filter and test a template names, whether it exists and how it wants its first argument
(``pass_context`` and friends). An entry records those and is used only while they still hold (a role's
``filter_plugins`` may define a name another run's role defines differently); otherwise Jinja compiles again.
A template that fails to compile is never cached: Ansible's error path runs every time, as before.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from types import CodeType
from typing import Any

_Plugins = tuple[tuple[str, str, bool, object], ...]  # (filters|tests, name, found, its jinja_pass_arg)
_JINJA_COMPILE_PARAMS = ("self", "source", "name", "filename", "raw", "defer_init")
_ENGINE_COMPILE_PARAMS = {
    "_compile_template": ("self", "template", "options"),
    "_compile_expression": ("self", "expression", "options"),
}


@dataclass(frozen=True)
class _Entry:
    code: CodeType
    plugins: _Plugins


class CodeCache:
    """Code objects by compile key, least recently used dropped past ``max_entries``; sources longer than
    ``max_source`` characters are not kept. Counts what it served, for tests and benchmarks."""

    def __init__(self, max_entries: int = 4096, max_source: int = 256 << 10) -> None:
        self.max_entries = max_entries
        self.max_source = max_source
        self.hits = self.misses = 0
        self._entries: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._lock = threading.Lock()  # a run's results thread templates too

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[Any, ...]) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: tuple[Any, ...], entry: _Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)


def _shape_problems() -> list[str]:
    import jinja2
    from ansible._internal._templating import _engine, _jinja_bits, _jinja_common

    env_class = _jinja_bits.AnsibleEnvironment
    names = getattr(_jinja_bits, "_TEMPLATE_OVERRIDE_FIELD_NAMES", None)
    checks = {
        "AnsibleEnvironment.compile: defined by Ansible (it would be replaced)": "compile" not in vars(env_class),
        "jinja2.Environment.compile: not the expected parameters": _params(jinja2.Environment.compile)
        == _JINJA_COMPILE_PARAMS,
        "jinja2 TemplateExpression: not the expected parameters": _params(jinja2.environment.TemplateExpression)
        == ("template", "undefined_to_none"),
        "AnsibleEnvironment.compile_expression: not found": callable(vars(env_class).get("compile_expression")),
        "AnsibleEnvironment._debuggable_template_source: not found": hasattr(env_class, "_debuggable_template_source"),
        "_jinja_bits._TEMPLATE_OVERRIDE_FIELD_NAMES: not a tuple of names": isinstance(names, tuple)
        and bool(names)
        and all(isinstance(n, str) for n in names),
        "_jinja_bits._TemplateCompileContext.current: not found": callable(
            getattr(getattr(_jinja_bits, "_TemplateCompileContext", None), "current", None)
        ),
        "_TemplateConfig.allow_embedded_templates: not a bool": isinstance(
            getattr(_jinja_common._TemplateConfig, "allow_embedded_templates", None), bool
        ),
        "TemplateOptions.DEFAULT: not found": hasattr(_engine.TemplateOptions, "DEFAULT"),
    }
    for method, params in _ENGINE_COMPILE_PARAMS.items():
        found = getattr(_engine.TemplateEngine, method, None)
        checks[f"TemplateEngine.{method}: not the expected parameters"] = found is not None and _params(found) == params
    return [problem for problem, holds in checks.items() if not holds]


def _params(function: Any) -> tuple[str, ...]:
    return tuple(inspect.signature(function).parameters)


def template_cache_problems() -> list[str]:
    """Why ``hook_template_cache`` cannot be installed on this ansible-core and Jinja (empty: it can)."""
    try:
        return _shape_problems()
    except Exception as exc:
        return [f"{type(exc).__name__}: {exc}"]


def _environment_key(env: Any) -> tuple[Any, ...]:
    """Everything of ``env`` (and the compile context) that Jinja's lexer, parser and code generator read."""
    from ansible._internal._templating._jinja_bits import _TEMPLATE_OVERRIDE_FIELD_NAMES, _TemplateCompileContext
    from ansible._internal._templating._jinja_common import _TemplateConfig

    context = _TemplateCompileContext.current(optional=True)
    return (
        type(env),
        tuple(getattr(env, name) for name in _TEMPLATE_OVERRIDE_FIELD_NAMES),
        env.optimized,
        env.autoescape,
        env.is_async,
        env.finalize,
        env.intercepted_binops,
        env.intercepted_unops,
        tuple(sorted(env.extensions)),
        env.code_generator_class,
        None if context is None else context.escape_backslashes,
        _TemplateConfig.allow_embedded_templates,
    )


def _plugin(env: Any, kind: str, name: str) -> tuple[str, str, bool, object]:
    try:
        func = getattr(env, kind).get(name)
    except Exception:  # a plugin that fails to load: Jinja's compile would fail too; never matches below
        return (kind, name, False, "failed to load")
    return (kind, name, func is not None, getattr(func, "jinja_pass_arg", None))


def _plugins_of(env: Any, tree: Any) -> _Plugins:
    from jinja2 import nodes

    named = tree.find_all((nodes.Filter, nodes.Test))
    found = {("filters" if isinstance(node, nodes.Filter) else "tests", node.name) for node in named}
    return tuple(_plugin(env, kind, name) for kind, name in sorted(found))


def _still_valid(env: Any, entry: _Entry) -> bool:
    return all(_plugin(env, recorded[0], recorded[1]) == recorded for recorded in entry.plugins)


def hook_template_cache(cache: CodeCache) -> None:
    """Serve ``AnsibleEnvironment`` compiles from ``cache`` (see the module docstring). Check
    ``template_cache_problems`` first."""
    import jinja2
    from ansible._internal._templating._jinja_bits import AnsibleEnvironment

    compile_source: Any = jinja2.Environment.compile  # overloaded on ``raw``; called with it as given
    compile_expression = vars(AnsibleEnvironment)["compile_expression"]
    capture = threading.local()  # the expression tree compile_expression hands to compile, and its code

    def cached_compile(
        self: Any,
        source: Any,
        name: str | None = None,
        filename: str | None = None,
        raw: bool = False,
        defer_init: bool = False,
    ) -> Any:
        if raw or not isinstance(source, str) or self._debuggable_template_source or len(source) > cache.max_source:
            code = compile_source(self, source, name, filename, raw, defer_init)
            if isinstance(source, jinja2.nodes.Template) and getattr(capture, "found", None) is not None:
                capture.found.append((code, source))
            return code
        key = ("template", str.__str__(source), name, filename, defer_init, _environment_key(self))
        entry = cache.get(key)
        if entry is not None and _still_valid(self, entry):
            cache.hits += 1
            return entry.code
        cache.misses += 1
        code = compile_source(self, source, name, filename, raw, defer_init)
        # Parsed again for the names of its filters and tests (a miss only). Should that fail, the next compile
        # of it is simply not served from the cache.
        with contextlib.suppress(Exception):
            cache.put(key, _Entry(code, _plugins_of(self, self.parse(source, name, filename))))
        return code

    def cached_compile_expression(self: Any, source: Any, undefined_to_none: bool = True) -> Any:
        if not isinstance(source, str) or self._debuggable_template_source or len(source) > cache.max_source:
            return compile_expression(self, source, undefined_to_none)
        key = ("expression", str.__str__(source), _environment_key(self))
        entry = cache.get(key)
        if entry is not None and _still_valid(self, entry):
            cache.hits += 1  # what jinja's compile_expression and from_string do, with the compile skipped
            template = self.template_class.from_code(self, entry.code, self.make_globals(None), None)
            return jinja2.environment.TemplateExpression(template, undefined_to_none)
        cache.misses += 1
        found: list[tuple[CodeType, Any]] = []
        capture.found = found
        try:
            expression = compile_expression(self, source, undefined_to_none)
        finally:
            capture.found = None
        if len(found) == 1:
            code, tree = found[0]
            cache.put(key, _Entry(code, _plugins_of(self, tree)))
        return expression

    AnsibleEnvironment.compile = cached_compile
    AnsibleEnvironment.compile_expression = cached_compile_expression


def precompile(templates: Iterable[str], expressions: Iterable[str], template_files: Iterable[str]) -> int:
    """Compile (never render) these as Ansible would: task arguments and variables (``templates``),
    conditionals (``expressions``, already stripped) and the contents of template files (the ``template``
    action compiles them without backslash escaping). Filling the hooked cache is the point; a source that
    does not compile only costs its try (since 2.19 Ansible defers a compile error into a marker, which needs a
    template context this has not got: whatever it raises is left for the run that renders it to report).
    How many did not compile."""
    from ansible._internal._templating._engine import TemplateEngine, TemplateOptions

    engine = TemplateEngine()
    unescaped = TemplateOptions(escape_backslashes=False, preserve_trailing_newlines=False)
    work: list[tuple[Any, str, Any]] = [(engine._compile_template, text, TemplateOptions.DEFAULT) for text in templates]
    work += [(engine._compile_template, text, unescaped) for text in template_files]
    work += [(engine._compile_expression, text, unescaped) for text in expressions]
    failed = 0
    for compile_, text, options in work:
        try:
            compile_(text, options)
        except Exception:
            failed += 1
    return failed
