"""The template cache (``warm.templates``, ``compat.templates``): the shape it relies on, that a cached template
renders what Jinja's own compile renders, what the key tells apart, its bound, and the zygote's scan of roles.

The hook changes ``AnsibleEnvironment`` for the whole process, so what needs it runs in a child interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.compat import templates as compat_templates
from hybrid_operator.ansible.warm import project, templates
from tests.unit.ansible.warm.speedups import OFF_HERE

_CHILD = r"""
import json, sys
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible._internal._templating._jinja_bits import AnsibleEnvironment
from jinja2 import pass_context
from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import templates

hooked = sys.argv[1] == "hooked"
if hooked:
    assert templates.install() == []
    compat.precompile(["{{ warmed }}!"], ["warmed > 1"], [])
out = {}

def counts():
    return [templates.CACHE[0].hits, templates.CACHE[0].misses] if hooked else None

for round in (1, 2):
    t = Templar(loader=DataLoader(), variables={"a": round, "b": [1, 2, 3], "warmed": round * 10, "s": "x\\y"})
    out[f"render{round}"] = [
        t.template(trust_as_template("{{ a + 1 }}-{{ b | map('string') | join(',') }}")),
        t.evaluate_conditional(trust_as_template("a > 1 and b is iterable")),
        t.template(trust_as_template("{{ warmed }}!")),
        t.evaluate_conditional(trust_as_template("warmed > 1")),
        t.template(trust_as_template("{{ 'a\\1' | length }}")),
        t.template(trust_as_template("{{ s | regex_replace('x', 'z') }}")),
        t.template(trust_as_template("<< a >>"), overrides=dict(variable_start_string="<<", variable_end_string=">>")),
    ]
    out[f"counts{round}"] = counts()
for broken in ("{{ a + }}", "{{ a + }}"):
    try:
        t.template(trust_as_template(broken))
    except Exception as exc:
        out.setdefault("errors", []).append(type(exc).__name__)
out["after_errors"] = counts()

# The same source, a filter of the same name that wants its context in the second environment only.
first, second = AnsibleEnvironment(), AnsibleEnvironment()
first.filters["hyop_probe"] = lambda value: f"plain {value}"
second.filters["hyop_probe"] = pass_context(lambda context, value: f"context {value} {context.get('who')}")
codes = [env.compile("{{ 1 | hyop_probe }}") for env in (first, first, second, second)]
out["plugins"] = [
    codes[0] is codes[1],  # a hit (hooked) or a new compile (plain)
    codes[1] is codes[2],  # never the first environment's code
    codes[2] is codes[3],  # the second's now
    "context, " in second.compile("{{ 1 | hyop_probe }}", raw=True),  # Jinja passes the context there
]
out["counts_plugins"] = counts()
# A role may hold sources that do not compile (a task never run, a template of a version not deployed):
# precompiling them raises nothing, whatever Ansible does with the error (since 2.19: a deferred marker).
out["precompile_broken"] = compat.precompile(["{{ a + }}", "ok {{ a }}"], ["a +"], ["{% if %}"])
print(json.dumps(out))
"""

pytestmark = pytest.mark.skipif(
    OFF_HERE, reason="the template cache is off on this ansible-core (test_speedups_off.py)"
)


def _child(mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-P", "-c", _CHILD, mode], capture_output=True, text=True, timeout=120, env=dict(os.environ)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_installed_ansible_core_and_jinja_have_the_shape() -> None:
    assert compat.template_cache_problems() == []


def test_cached_templates_render_what_jinja_compiles() -> None:
    hooked, plain = _child("hooked"), _child("plain")
    for key in ("render1", "render2", "errors"):
        assert hooked[key] == plain[key], key
    assert hooked["render2"][0] == "3-1,2,3" and hooked["render2"][2] == "20!"
    assert hooked["plugins"] == [True, False, True, True] and plain["plugins"] == [False, False, False, True]
    # Precompiling misses twice. Round 1: the warmed template and conditional hit, five new sources miss.
    # Round 2: all seven hit.
    assert hooked["counts1"] == [2, 7]
    assert hooked["counts2"] == [9, 7]
    assert hooked["after_errors"] == [9, 9]  # a source that does not compile is never cached
    # The filter's pass_context differs between the environments: a miss for each, a hit after each.
    assert [b - a for a, b in zip(hooked["after_errors"], hooked["counts_plugins"], strict=True)] == [2, 2]
    assert hooked["precompile_broken"] == plain["precompile_broken"] == 3  # counted, none raised


def test_the_key_tells_apart_what_changes_the_code() -> None:
    from ansible._internal._templating._jinja_bits import AnsibleEnvironment, _TemplateCompileContext

    env = AnsibleEnvironment()
    plain = compat_templates._environment_key(env)
    assert compat_templates._environment_key(AnsibleEnvironment()) == plain
    assert compat_templates._environment_key(env.overlay(variable_start_string="<<")) != plain
    assert compat_templates._environment_key(env.overlay(trim_blocks=False)) != plain
    with _TemplateCompileContext(escape_backslashes=True):
        escaped = compat_templates._environment_key(env)
    with _TemplateCompileContext(escape_backslashes=False):
        unescaped = compat_templates._environment_key(env)
    assert len({plain, escaped, unescaped}) == 3


def test_the_cache_is_bounded() -> None:
    cache = compat.CodeCache(max_entries=2)
    code = compile("1", "<test>", "eval")
    for key in ("a", "b", "c"):
        cache.put((key,), compat_templates._Entry(code, ()))
    assert cache.get(("a",)) is None and len(cache) == 2
    assert cache.get(("b",)) is not None
    cache.put(("d",), compat_templates._Entry(code, ()))
    assert cache.get(("c",)) is None and cache.get(("b",)) is not None  # b was used last


def test_strings_of_a_role_file() -> None:
    data = [
        {"name": "A {{ templated }} name", "ansible.builtin.debug": {"msg": "{{ x }}"}, "when": "x is defined"},
        {"ansible.builtin.assert": {"that": ["a > 1", " b "]}, "changed_when": "{{ legacy }}", "failed_when": False},
        {"vars": {"plain": "no template", "nested": {"deep": ["{% if y %}y{% endif %}"]}}, "until": "   "},
    ]
    found_templates, expressions = templates.strings_of(data)
    assert found_templates == ["A {{ templated }} name", "{{ x }}", "{{ legacy }}", "{% if y %}y{% endif %}"]
    assert expressions == ["x is defined", "a > 1", "b"]


def _role(root: Path, name: str, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / name / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_role_files_finds_the_yaml_and_templates_of_roles(tmp_path: Path) -> None:
    _role(tmp_path, "web", {"tasks/main.yml": "---\n", "tasks/more/x.yaml": "", "templates/t.j2": "{{ a }}"})
    _role(tmp_path, "web", {"vars/main.yml": "", "files/ignored.yml": "", "tasks/notes.txt": ""})
    _role(tmp_path, "only-meta", {"meta/main.yml": ""})
    _role(tmp_path, "not-a-role", {"README.md": ""})
    found = project.role_files(project.roles_path_entries(f"{tmp_path}{os.pathsep}{tmp_path / 'missing'}"))
    names = [p.relative_to(tmp_path).as_posix() for p in found.yaml]
    assert names == ["only-meta/meta/main.yml", "web/tasks/main.yml", "web/tasks/more/x.yaml", "web/vars/main.yml"]
    assert [p.name for p in found.templates] == ["t.j2"] and not found.truncated


def test_role_files_takes_a_role_given_itself_once_however_often_it_is_found(tmp_path: Path) -> None:
    _role(tmp_path, "web", {"tasks/main.yml": "---\n", "templates/t.j2": "{{ a }}"})
    _role(tmp_path, "db", {"tasks/main.yml": "---\n"})
    (tmp_path / "alias").symlink_to(tmp_path / "web")
    found = project.role_files([tmp_path / "web", tmp_path, tmp_path / "alias", tmp_path / "missing"])
    names = [p.relative_to(tmp_path).as_posix() for p in found.yaml]
    assert names == ["web/tasks/main.yml", "db/tasks/main.yml"]  # the role itself first, then the others
    assert [p.name for p in found.templates] == ["t.j2"]


def test_role_files_finds_roles_whose_names_hold_slashes_down_to_its_depth(tmp_path: Path) -> None:
    _role(tmp_path, "v2.27/kiali-deploy", {"tasks/main.yml": "---\n"})  # Kiali's roles/<version>/<role>
    _role(tmp_path, "a/b/deep", {"tasks/main.yml": "---\n"})
    _role(tmp_path, "a/b/c/too-deep", {"tasks/main.yml": "---\n"})
    _role(tmp_path, ".hidden/role", {"tasks/main.yml": "---\n"})
    _role(tmp_path, "web", {"tasks/main.yml": "---\n", "tasks/inner/tasks/x.yml": "---\n"})
    (tmp_path / "loop").mkdir()
    (tmp_path / "loop" / "back").symlink_to(tmp_path)  # a link below a root that is no role: not followed
    found = project.role_files([tmp_path])
    names = sorted(p.relative_to(tmp_path).as_posix() for p in found.yaml)
    # A role's own directories are its files, never other roles (web/tasks/inner is web's).
    assert names == [
        "a/b/deep/tasks/main.yml",
        "v2.27/kiali-deploy/tasks/main.yml",
        "web/tasks/inner/tasks/x.yml",
        "web/tasks/main.yml",
    ]


def test_role_files_stops_at_its_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _role(tmp_path, "big", {f"tasks/{i}.yml": "---\n" for i in range(5)})
    monkeypatch.setattr(project, "MAX_FILES", 3)
    found = project.role_files([tmp_path])
    assert len(found.yaml) == 3 and found.truncated


_LOOKUPS = r"""
import json, sys, time
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder()._install()
from ansible.plugins.loader import filter_loader, test_loader
from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import templates

missing = compat.find_missing(templates.jinja_builtin_names())
compat.hook_jinja_lookups(missing)
out = {
    "missing": sorted(missing.get("filter", ())),
    "length": filter_loader.get("length"),
    "legacy_length": filter_loader.get("ansible.legacy.length"),
    "to_json": filter_loader.get("to_json") is not None,
    "collection": filter_loader.get("community.general.json_query") is not None,
    "test_string": test_loader.get("string"),
}
filter_loader.add_directory(sys.argv[1])  # a role's filter_plugins/ with its own ``length``
found = filter_loader.get("length")
out["role_length"] = found.j2_function("abc") if found is not None else None
print(json.dumps(out))
"""

_ROLE_FILTER = """
class FilterModule:
    def filters(self):
        return {"length": lambda value: "the role's length"}
"""


def test_jinja_names_ansible_has_no_plugin_of_are_known_and_a_role_can_still_add_them(tmp_path: Path) -> None:
    assert compat.jinja_lookup_problems() == []
    (tmp_path / "mine.py").write_text(_ROLE_FILTER, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-P", "-c", _LOOKUPS, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert {"length", "join", "lower", "list"} <= set(out["missing"]) and "to_json" not in out["missing"]
    assert out["length"] is None and out["legacy_length"] is None and out["test_string"] is None
    assert out["to_json"] and out["collection"]
    assert out["role_length"] == "the role's length"
