"""``hybrid-operator check``'s porting warnings: what a role's text shows of the porting page's pitfalls."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybrid_operator import cli
from hybrid_operator.project import jinjakinds, porting
from hybrid_operator.project.jinjakinds import NOT_BOOLEAN, Kind

ROOT = Path(__file__).resolve().parents[3]
LEGACY = ROOT / "tests" / "fixtures" / "projects" / "porting"
TASKS = "roles/legacy/tasks/main.yml"


def findings_of(project: Path) -> list[porting.Finding]:
    scope = porting.scope_of([(str(project / "roles" / "legacy"), None)], [project], {"legacy_mode": "fast"})
    return porting.check(scope, shown=project)


def test_each_pitfall_the_role_has_is_found_once_and_its_fixed_form_never() -> None:
    found = [(f.path, f.line, f.pitfall) for f in findings_of(LEGACY)]
    assert found == [
        (TASKS, 5, porting.CONDITIONAL),  # when: a string from the environment
        (TASKS, 14, porting.SHADOWED),  # register: a name a spec key can take
        (TASKS, 22, porting.CONDITIONAL),  # when: a registered result
        (TASKS, 27, porting.TEMPLATED_CONDITIONAL),
        (TASKS, 32, porting.CONDITIONAL),  # that: a list
        (TASKS, 37, porting.CONDITIONAL),  # a block's when: a lookup
        (TASKS, 41, porting.NUMBERS),  # 'step ' + a number
        (TASKS, 51, porting.NUMBERS),  # a label from a number
        (TASKS, 55, porting.NUMBERS),  # ConfigMap data from arithmetic
    ]


def test_a_finding_names_the_place_the_variable_was_set_and_the_section() -> None:
    first = findings_of(LEGACY)[0]
    assert first.render() == (
        f"{TASKS}:5: when: `legacy_flag_from_env` (set at roles/legacy/defaults/main.yml:2) is a string, not a "
        "boolean, which 2.19+ refuses (say `| bool`, `is ...`, `| length > 0`) "
        f"({porting.PAGE}#1-a-conditional-must-be-a-boolean)"
    )


def test_every_anchor_is_a_section_of_the_porting_page() -> None:
    headings = re.findall(r"^## (.+)$", (ROOT / porting.SOURCE).read_text(encoding="utf-8"), re.MULTILINE)
    anchors = {re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-") for heading in headings}
    assert {pitfall.anchor for pitfall in porting.PITFALLS} <= anchors


def test_the_shipped_roles_have_none() -> None:
    """roles/foo and roles/virtualmachine run on every supported ansible-core, 2.18 included."""
    scope = porting.scope_of([(str(ROOT / "roles" / "foo"), None)], [ROOT], {})
    assert {path.name for path in scope.roles} >= {"foo", "virtualmachine"}
    assert porting.check(scope, shown=ROOT) == []


def test_check_warns_and_exits_0_or_1_with_strict(capsys: pytest.CaptureFixture[str]) -> None:
    watches = str(LEGACY / "watches.yaml")
    assert cli.main(["check", "--watches-file", watches]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if f"{porting.PAGE}#" in line]
    page = re.escape(porting.PAGE)
    assert len(lines) == 9 and all(re.match(rf"^\S+:\d+: .+ \({page}#[a-z0-9-]+\)$", ln) for ln in lines)
    assert "9 place(s)" in err
    assert cli.main(["check", "--strict", "--watches-file", watches]) == 1


def test_a_file_that_is_not_yaml_is_a_note_not_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    role = tmp_path / "roles" / "r"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text("- name: ok\n  ansible.builtin.debug: {}\n  when: flag | bool\n")
    (role / "tasks" / "objects.yml").write_text("---\nmetadata:\n  name: {{ name }}-x\n---\nkind: x\n")
    (tmp_path / "watches.yaml").write_text("- {version: v1, group: g.example.com, kind: K, role: r}\n")
    assert cli.main(["check", "--strict", "--watches-file", str(tmp_path / "watches.yaml")]) == 0
    err = capsys.readouterr().err
    assert "tasks/objects.yml:1: not checked: not YAML before it is rendered" in err and "place(s)" not in err


_names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: n not in ("true", "false", "none", "not", "in", "is", "if", "else", "and", "or")
)


@given(name=_names, kind=st.sampled_from(list(Kind)))
def test_a_bare_variable_as_a_conditional_is_warned_about_exactly_when_its_kind_is_not_boolean(
    name: str, kind: Kind
) -> None:
    expr = jinjakinds.parse_expression(name)
    assert expr is not None
    assert (jinjakinds.kind_of(expr, {name: kind}) in NOT_BOOLEAN) == (kind in NOT_BOOLEAN)
    for fixed in (f"{name} | bool", f"{name} is defined", f"{name} | length > 0", f"not {name}"):
        parsed = jinjakinds.parse_expression(fixed)
        assert parsed is not None and jinjakinds.kind_of(parsed, {name: kind}) == Kind.BOOL


@given(name=_names, op=st.sampled_from(["+", "-", "*", "//", "%"]), number=st.integers(0, 10**6))
def test_arithmetic_on_an_int_is_a_number_and_adding_text_to_it_is_mixed(name: str, op: str, number: int) -> None:
    expr = jinjakinds.parse_expression(f"({name} | int) {op} {number}")
    assert expr is not None and jinjakinds.kind_of(expr, {}) == Kind.NUMBER
    mixed = jinjakinds.parse_expression(f"'x' + (({name} | int) {op} {number})")
    assert mixed is not None and jinjakinds.mixed_plus(mixed, {}) is not None
    joined = jinjakinds.parse_expression(f"'x' ~ (({name} | int) {op} {number})")
    assert joined is not None and jinjakinds.mixed_plus(joined, {}) is None


@given(text=st.text(max_size=80))
def test_any_text_is_read_without_error(text: str) -> None:
    for expr in [jinjakinds.parse_expression(text), *jinjakinds.expressions(text)]:
        if expr is not None:
            jinjakinds.kind_of(expr, {})
            jinjakinds.mixed_plus(expr, {})
            jinjakinds.source(expr)
    jinjakinds.lone_template(text)


_values: Any = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from(["{{ x + 'a' }}", "{{ x | int }}", "x", "{{", "y | bool"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["when", "that", "data", "block", "vars", "k8s", "definition", "a"]), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tasks=st.lists(_values, max_size=5), defaults=st.dictionaries(_names, _values, max_size=4))
def test_any_role_is_checked_without_error_and_every_line_is_in_its_file(
    tmp_path_factory: pytest.TempPathFactory, tasks: list[Any], defaults: dict[str, Any]
) -> None:
    role = tmp_path_factory.mktemp("project") / "roles" / "r"
    for sub, content in (("tasks", tasks), ("defaults", defaults)):
        (role / sub).mkdir(parents=True)
        (role / sub / "main.yml").write_text(yaml.safe_dump(content), encoding="utf-8")
    found = porting.check(porting.scope_of([(str(role), None)], [], {}), shown=role)
    for finding in found:
        lines = (role / finding.path).read_text(encoding="utf-8").count("\n") + 1
        assert 1 <= finding.line <= lines


# Pitfall 6: a test on a variable nothing defines (kubev2v/forklift's operator, ansible-core 2.18 -> 2.19+).
FORKLIFT = ROOT / "tests" / "fixtures" / "projects" / "porting-undefined"


def _check(role: Path, watch_vars: dict[str, Any] | None = None) -> list[porting.Finding]:
    return porting.check(porting.scope_of([(str(role), None)], [], watch_vars or {}), shown=role)


def _role(tmp_path: Path, files: dict[str, str]) -> Path:
    role = tmp_path / "roles" / "r"
    for name, text in files.items():
        (role / name).parent.mkdir(parents=True, exist_ok=True)
        (role / name).write_text(text, encoding="utf-8")
    return role


def test_a_test_on_a_spec_field_nothing_defines_is_found_in_a_template(capsys: pytest.CaptureFixture[str]) -> None:
    """The forklift case: its deployment template tests `controller_cdi_export_token_ttl is number`."""
    assert cli.main(["check", "--strict", "--watches-file", str(FORKLIFT / "watches.yaml")]) == 1
    out, err = capsys.readouterr()
    (line,) = [ln for ln in out.splitlines() if porting.UNDEFINED_TEST.anchor in ln]
    where, message = line.split(": ", 1)
    assert where.endswith("roles/controller/templates/deployment-controller.yml.j2:15")
    assert message.startswith(
        "`controller_cdi_export_token_ttl is number`: nothing in the project defines `controller_cdi_export_token_ttl`"
    )
    assert "2.19+ fails the run" in line and line.endswith(f"({porting.PAGE}#{porting.UNDEFINED_TEST.anchor})")
    assert "1 place(s)" in err  # the guarded test and the default()ed loop are not warned about


@pytest.mark.parametrize(
    "when",
    [
        "port is number",
        "port.value is string",
        "port['a'] is mapping",
        "port is not none",
        "other is defined and port is number",
    ],
)
def test_each_test_on_an_undefined_variable_is_found(tmp_path: Path, when: str) -> None:
    role = _role(tmp_path, {"tasks/main.yml": _task(when)})
    assert [(f.line, f.pitfall) for f in _check(role)] == [(3, porting.UNDEFINED_TEST)]


def _task(when: str) -> str:
    return f"- name: t\n  ansible.builtin.debug: {{}}\n  when: {when}\n"


_SPEC = "argument_specs:\n  main:\n    options:\n      port:\n        type: int\n        default: 1\n"
_LOOP = "- name: l\n  ansible.builtin.debug: {}\n  loop: [1]\n  loop_control:\n    loop_var: port\n"


@pytest.mark.parametrize(
    "files",
    [
        {"tasks/main.yml": _task("port is defined and port is number")},
        {"tasks/main.yml": _task("[port is defined, port is number]")},
        {"tasks/main.yml": _task("port is undefined or port is number")},
        {"tasks/main.yml": _task("port | default(1) is number")},
        {"defaults/main.yml": "port: 1\n", "tasks/main.yml": _task("port is number")},
        {"vars/main.yml": "port: 1\n", "templates/t.j2": "{% if port is number %}x{% endif %}\n"},
        {"tasks/main.yml": "- name: s\n  ansible.builtin.set_fact:\n    port: 1\n" + _task("port is number")},
        {"tasks/main.yml": "- name: s\n  ansible.builtin.set_fact: port=1\n" + _task("port is number")},
        {
            "tasks/main.yml": "- name: s\n  ansible.builtin.command: id\n  register: port\n"
            "  changed_when: port is changed\n"
        },
        {"tasks/main.yml": _LOOP + "  when: port is number\n"},
        {
            "vars/x.yml": "port: 1\n",
            "tasks/main.yml": "- name: v\n  ansible.builtin.include_vars: x.yml\n" + _task("port is number"),
        },
        {  # an include_vars the check cannot follow: any name may be defined
            "tasks/main.yml": "- name: v\n  ansible.builtin.include_vars:\n    file: '{{ flavour }}.yml'\n"
            + _task("port is number"),
        },
        {"meta/argument_specs.yml": _SPEC, "tasks/main.yml": _task("port is number")},
        {"templates/t.j2": "{% set port = 1 %}{% if port is number %}{% endif %}"},
        {"templates/t.j2": "{% for p in [1] %}{{ p is number }}{% endfor %}"},
        {"templates/t.j2": "{% macro m(port) %}{{ port is number }}{% endmacro %}{{ item is string }}"},
        {"templates/t.j2": "{{ ansible_check_mode is sameas true }}"},
        {"tasks/main.yml": _task("_cache_example_com_memcached.spec is mapping")},
    ],
)
def test_a_defined_or_guarded_variable_is_not_warned_about(tmp_path: Path, files: dict[str, str]) -> None:
    role = _role(tmp_path, files)
    assert [f for f in _check(role) if f.pitfall == porting.UNDEFINED_TEST] == []


def test_watch_vars_define_a_variable(tmp_path: Path) -> None:
    role = _role(tmp_path, {"tasks/main.yml": _task("port is number")})
    assert _check(role, {"port": 80}) == []


def test_a_playbook_with_vars_files_turns_pitfall_5_off(tmp_path: Path) -> None:
    playbook = tmp_path / "pb.yml"
    playbook.write_text(
        "- hosts: localhost\n  vars_files: [extra.yml]\n  tasks:\n"
        "    - name: t\n      ansible.builtin.debug: {}\n      when: port is number\n"
    )
    assert porting.check(porting.scope_of([(None, playbook)], [], {}), shown=tmp_path) == []


@pytest.mark.parametrize(
    ("template", "note"),
    [
        (b"\xff\xfe{% if x is number %}", "not UTF-8"),
        (b"{% if x is number %}", "Jinja cannot parse it"),  # no endif
        (b"{% if a %}" * 3000 + b"x" + b"{% endif %}" * 3000, ""),  # deep nesting: parsed or noted, never a crash
        (b"{{ x is number }}" + b" " * (2 * 1024 * 1024), "over the limit"),
    ],
)
def test_a_hostile_template_is_a_note_or_a_finding_never_a_crash(tmp_path: Path, template: bytes, note: str) -> None:
    role = _role(tmp_path, {"tasks/main.yml": "- name: t\n  ansible.builtin.debug: {}\n"})
    (role / "templates").mkdir()
    (role / "templates" / "t.j2").write_bytes(template)
    found = _check(role)
    notes = [f.message for f in found if f.pitfall is None]
    if note:
        assert len(notes) == 1 and note in notes[0] and notes[0].startswith("not checked")
    assert all(f.path == "templates/t.j2" for f in found)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.sampled_from(list("{}%# isnotdefxy|()[].'\"\n")), max_size=120))
def test_any_template_text_is_checked_without_error(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    role = tmp_path_factory.mktemp("p") / "roles" / "r"
    (role / "templates").mkdir(parents=True)
    (role / "templates" / "t.j2").write_text(text, encoding="utf-8")
    for finding in _check(role):
        assert finding.path == "templates/t.j2" and 1 <= finding.line <= text.count("\n") + 1


def test_a_register_or_set_fact_a_spec_key_could_take_is_named_and_a_private_one_is_not(tmp_path: Path) -> None:
    role = tmp_path / "roles" / "legacy"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text(
        "- name: Public\n  ansible.builtin.command: 'true'\n  register: deployment\n  changed_when: false\n"
        "- name: Private\n  ansible.builtin.command: 'true'\n  register: _legacy_deployment\n  changed_when: false\n"
        "- name: Facts\n  ansible.builtin.set_fact:\n    replicas: 3\n    _legacy_size: 1\n    cacheable: true\n"
    )
    shadowed = [(f.line, f.message.split(":")[0]) for f in findings_of(tmp_path) if f.pitfall is porting.SHADOWED]
    assert shadowed == [(3, "register 'deployment'"), (11, "set_fact 'replicas'")]
