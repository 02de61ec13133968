"""watches.yaml against hostile input: every failure is a ConfigError naming the entry and field, never a traceback.

The cases an attacker's test found (encoding, depth, size, aliases, durations, selectors, names, roles that
are not roles, playbooks that are not playbooks), then property tests: arbitrary bytes, text, YAML
structures and mutations of a valid file give either a ConfigError or watches that pass every check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hybrid_operator.cli import main
from hybrid_operator.errors import ConfigError
from hybrid_operator.settings.durations import PERIOD_CEILING
from hybrid_operator.settings.watches import Target, load_watches

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ROLES = FIXTURES / "roles"
ENTRY = "- version: v1alpha1\n  group: cache.example.com\n  kind: Memcached\n  role: memcached\n"
ENTRY0 = "entry 0 (cache.example.com/v1alpha1/Memcached)"


def write(tmp_path: Path, text: str | bytes, name: str = "watches.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def refused(path: Path, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_watches(path, roles_paths=[ROLES], env=env or {})
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- skipConvergedAtStart -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("'true'", "'true'"),
        ("'on'", "'on'"),
        ("1", "1"),
        ("~", "None"),
        ("[true]", "[True]"),
        ("{a: true}", "{'a': True}"),
        ("'" + "x" * 5000 + "'", "'xxxx"),
    ],
)
def test_skip_converged_at_start_is_true_or_false_and_nothing_else(tmp_path: Path, value: str, shown: str) -> None:
    message = refused(write(tmp_path, ENTRY + f"  skipConvergedAtStart: {value}\n"))
    assert f"{ENTRY0}: field 'skipConvergedAtStart': must be true or false, got {shown}" in message
    assert len(message) < 300  # a hostile value is cut short, not echoed


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("false", False)])
def test_skip_converged_at_start_is_read(tmp_path: Path, value: str, expected: bool) -> None:
    [watch] = load_watches(write(tmp_path, ENTRY + f"  skipConvergedAtStart: {value}\n"), roles_paths=[ROLES], env={})
    assert watch.skip_converged_at_start is expected


# -- size, encoding, depth -----------------------------------------------------------------------------


def test_a_50_mb_file_is_refused_with_the_size_error(tmp_path: Path) -> None:
    path = tmp_path / "watches.yaml"
    with path.open("wb") as stream:
        stream.write(ENTRY.encode())
        stream.truncate(50 << 20)
    assert "is 52428800 bytes, over the limit of 1 MiB" in refused(path)


def test_expansion_past_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, ENTRY + "  vars: {a: '${BIG}', b: '${BIG}'}\n")
    assert "over the limit of 1 MiB after ${VAR} expansion" in refused(path, env={"BIG": "x" * 600_000})


def test_non_utf8_names_the_byte_offset(tmp_path: Path) -> None:
    path = write(tmp_path, ENTRY.encode() + b"  vars: {a: \xc3\x28}\n")
    assert f"{path}: watches file is not UTF-8 text (byte offset {len(ENTRY) + 12}" in refused(path)


@pytest.mark.parametrize(
    ("nesting", "field"),
    [
        ("[" * 5000 + "]" * 5000, "field 'vars[0][0][0]"),
        ("{a: " * 5000 + "1" + "}" * 5000, "field 'vars.a.a.a"),
        ("\n" + "".join(" " * (i + 4) + "k:\n" for i in range(900)) + " " * 904 + "x: 1", "field 'vars.k.k.k"),
    ],
)
def test_deep_nesting_is_refused_naming_entry_and_field(tmp_path: Path, nesting: str, field: str) -> None:
    message = refused(write(tmp_path, ENTRY + "  vars: " + nesting + "\n"))
    assert ENTRY0 in message
    assert field in message
    assert "nested deeper than 64 levels" in message


def test_an_alias_bomb_names_entry_and_field(tmp_path: Path) -> None:
    bomb = "\n".join(f"    l{i}: &l{i} [" + ", ".join([f"*l{i - 1}" if i else "lol"] * 9) + "]" for i in range(10))
    message = refused(write(tmp_path, ENTRY + "  vars:\n" + bomb + "\n"))
    assert f"{ENTRY0}: field 'vars.l0': anchors and aliases (&name, *name) are not allowed (line 6" in message


def test_an_anchor_on_an_entry_is_refused(tmp_path: Path) -> None:
    message = refused(write(tmp_path, ENTRY.replace("- version", "- &e version") + "- *e\n"))
    assert "anchors and aliases" in message


# -- reconcilePeriod -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (".inf", "not a finite duration"),
        ("-.inf", "negative duration"),
        (".nan", "not a finite duration"),
        ("1.0e+400", "not a finite duration"),
        ("9" * 400, "not a finite duration"),
        ("'" + "9" * 400 + "s'", "not a finite duration"),
        ("1ns", "must be 0 (never) or from 1s to 8760h, got '1ns'"),
        ("999ms", "must be 0 (never) or from 1s to 8760h"),
        ("0.5", "must be 0 (never) or from 1s to 8760h"),
        ("8761h", "must be 0 (never) or from 1s to 8760h"),
        ("true", "not a duration"),
        ("[1s]", "not a duration"),
    ],
)
def test_bad_reconcile_periods(tmp_path: Path, value: str, problem: str) -> None:
    message = refused(write(tmp_path, ENTRY + f"  reconcilePeriod: {value}\n"))
    assert f"{ENTRY0}: field 'reconcilePeriod': {problem}" in message
    assert len(message) < 400


@pytest.mark.parametrize(("value", "seconds"), [("0", 0.0), ("1s", 1.0), ("8760h", PERIOD_CEILING), ("90", 90.0)])
def test_reconcile_period_bounds_are_inclusive(tmp_path: Path, value: str, seconds: float) -> None:
    [watch] = load_watches(write(tmp_path, ENTRY + f"  reconcilePeriod: {value}\n"), roles_paths=[ROLES], env={})
    assert watch.reconcile_period == seconds


# -- group, version, kind, selector, finalizer name ----------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("version: v1alpha1", "version: v1/../.."), "version"),
        (("kind: Memcached", "kind: Mem cached"), "kind"),
        (("kind: Memcached", "kind: 'Memcached\\n'"), "kind"),
        (("group: cache.example.com", "group: cache.example.com/x"), "group"),
        (("group: cache.example.com", "group: 5"), "group"),
    ],
)
def test_gvk_parts_are_checked_as_the_api_server_does(tmp_path: Path, change: tuple[str, str], field: str) -> None:
    message = refused(write(tmp_path, ENTRY.replace(*change)))
    assert f"field '{field}'" in message
    assert "entry 0 (" in message


@pytest.mark.parametrize(
    ("selector", "field", "problem"),
    [
        ("{matchLabels: {tier: 'b,c!=d'}}", "selector.matchLabels.tier", "label value 'b,c!=d'"),
        ("{matchLabels: {'a b': x}}", "selector.matchLabels.a b", "label key 'a b'"),
        ("{matchLabels: {tier: 1}}", "selector.matchLabels.tier", "label value must be a string"),
        ("{matchLabels: {tier: " + "x" * 64 + "}}", "selector.matchLabels.tier", "label value"),
        ("{matchLabels: [a]}", "selector.matchLabels", "must be a mapping"),
        ("{matchExpressions: [{key: 'a,b', operator: Exists}]}", "selector.matchExpressions[0].key", "label key"),
        (
            "{matchExpressions: [{key: a, operator: In, values: [x, 'y)']}]}",
            "selector.matchExpressions[0].values[1]",
            "label value 'y)'",
        ),
        ("{matchExpressions: [{key: a, operator: In, values: x}]}", "selector.matchExpressions[0].values", "a list"),
        ("{matchExpressions: [{key: a, operator: Exists, values: [x]}]}", "selector.matchExpressions[0].values", ""),
        ("{matchExpressions: [{key: a, operator: In, values: []}]}", "selector.matchExpressions[0]", "non-empty"),
        ("{matchExpressions: [{key: a, operator: Exists, x: 1}]}", "selector.matchExpressions[0].x", "unknown"),
        ("{matchExpressions: [{key: a, operator: in, values: [x]}]}", "selector.matchExpressions[0]", "NotIn"),
        ("{matchExpressions: [{key: a, operator: [In], values: [x]}]}", "selector.matchExpressions[0]", "NotIn"),
        ("{matchExpressions: [{key: a, operator: {In: 1}}]}", "selector.matchExpressions[0]", "NotIn"),
    ],
)
def test_selector_keys_values_and_operators(tmp_path: Path, selector: str, field: str, problem: str) -> None:
    message = refused(write(tmp_path, ENTRY + f"  selector: {selector}\n"))
    assert f"{ENTRY0}: field '{field}': " in message
    assert problem in message


def test_a_valid_selector_with_prefixes_and_empty_values(tmp_path: Path) -> None:
    text = (
        ENTRY + "  selector:\n    matchLabels: {app.kubernetes.io/name: cache, empty: ''}\n"
        "    matchExpressions: [{key: example.com/tier, operator: NotIn, values: [a.b_c-d, x]}]\n"
    )
    [watch] = load_watches(write(tmp_path, text), roles_paths=[ROLES], env={})
    assert watch.selector == "app.kubernetes.io/name=cache,empty=,example.com/tier notin (a.b_c-d,x)"


@pytest.mark.parametrize(
    ("blacklist", "field"),
    [
        ("[{version: v1, kind: 'A B'}]", "blacklist[0].kind"),
        ("[{version: 'v1 ', kind: Secret}]", "blacklist[0].version"),
        ("[{group: APPS, version: v1, kind: Deployment}]", "blacklist[0].group"),
        ("[{version: v1, kind: Secret, plural: secrets}]", "blacklist[0].plural"),
    ],
)
def test_blacklist_gvks_are_checked(tmp_path: Path, blacklist: str, field: str) -> None:
    assert f"{ENTRY0}: field '{field}'" in refused(write(tmp_path, ENTRY + f"  blacklist: {blacklist}\n"))


@pytest.mark.parametrize("name", ["a b", "example.com/", "/x", "a/b/c", "Example.com/x", "x" * 64])
def test_finalizer_names_are_qualified_names(tmp_path: Path, name: str) -> None:
    text = ENTRY + f"  finalizer: {{name: '{name}', vars: {{state: absent}}}}\n"
    assert f"{ENTRY0}: field 'finalizer.name'" in refused(write(tmp_path, text))


# -- roles that are not roles, playbooks that are not playbooks ----------------------------------------


def not_a_role(tmp_path: Path) -> Path:
    """A directory like /etc: files and directories, none that Ansible loads from a role."""
    directory = tmp_path / "etc"
    (directory / "ssh").mkdir(parents=True)
    (directory / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    (directory / "tasks").mkdir()  # even an empty tasks/ does not make a role
    return directory


@pytest.mark.parametrize("field", ["role", "finalizer.role"])
def test_a_directory_that_is_not_a_role_is_refused(tmp_path: Path, field: str) -> None:
    etc = not_a_role(tmp_path)
    text = ENTRY.replace("role: memcached", f"role: {etc}") if field == "role" else ENTRY
    if field != "role":
        text += f"  finalizer: {{name: example.com/x, role: {etc}}}\n"
    message = refused(write(tmp_path, text))
    assert f"{ENTRY0}: field '{field}': {etc} is not an Ansible role: it has none of tasks/main.yml" in message


def test_a_relative_role_that_is_not_a_role_is_refused(tmp_path: Path) -> None:
    not_a_role(tmp_path)
    message = refused(write(tmp_path, ENTRY.replace("role: memcached", "role: etc")))
    assert f"field 'role': {tmp_path / 'etc'} is not an Ansible role" in message


@pytest.mark.parametrize(
    "content", ["tasks/main.yaml", "tasks/main", "handlers/main.yml", "meta/main.yml", "defaults/main/a.yml"]
)
def test_any_file_ansible_loads_makes_a_role(tmp_path: Path, content: str) -> None:
    role = tmp_path / "myrole"
    (role / content).parent.mkdir(parents=True)
    (role / content).write_text("---\n", encoding="utf-8")
    [watch] = load_watches(write(tmp_path, ENTRY.replace("role: memcached", f"role: {role}")), env={})
    assert watch.target == Target(role=str(role))


@pytest.mark.parametrize("role", ["'a\\0b'", "'" + "r" * 5000 + "'", "'" + "/x" * 200 + "'", "'" + "y" * 300 + "'"])
def test_role_names_the_system_refuses_are_config_errors(tmp_path: Path, role: str) -> None:
    assert f"{ENTRY0}: field 'role'" in refused(write(tmp_path, ENTRY.replace("role: memcached", f"role: {role}")))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("root:x:0:0:root:/root:/bin/bash\nbin:x:1:1::/:/usr/sbin/nologin\n", "not a list of plays"),
        ("", "empty"),
        ("- name: no hosts\n", "neither 'hosts' nor 'import_playbook'"),
        (b"\x7fELF\x02\x01\x01\x00\xff", "not UTF-8 text"),
        ("- hosts: [all\n", "not valid YAML"),
    ],
)
def test_a_file_that_is_not_a_playbook_is_refused(tmp_path: Path, content: str | bytes, problem: str) -> None:
    playbook = write(tmp_path, content, "passwd")
    for field, text in (
        ("playbook", ENTRY.replace("role: memcached", f"playbook: {playbook}")),
        ("finalizer.playbook", ENTRY + f"  finalizer: {{name: example.com/x, playbook: {playbook}}}\n"),
    ):
        message = refused(write(tmp_path, text))
        assert f"{ENTRY0}: field '{field}'" in message
        assert problem in message


def test_a_huge_playbook_is_refused_by_its_size(tmp_path: Path) -> None:
    playbook = tmp_path / "huge.yml"
    with playbook.open("wb") as stream:
        stream.truncate(50 << 20)
    message = refused(write(tmp_path, ENTRY.replace("role: memcached", f"playbook: {playbook}")))
    assert "field 'playbook'" in message
    assert "over the limit of 4 MiB" in message


def test_a_playbook_path_that_is_a_directory_is_not_found(tmp_path: Path) -> None:
    message = refused(write(tmp_path, ENTRY.replace("role: memcached", f"playbook: {tmp_path}")))
    assert f"field 'playbook': file not found: {tmp_path}" in message


# -- ${VAR} expansion cannot get around the checks -----------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("v1\n  vars: {a: &x 1, b: *x}", "anchors and aliases"),
        ("v1\n  role: /", "duplicate key 'role'"),
        ("v1\n  reconcilePeriod: 1ns", "field 'reconcilePeriod'"),
        ("v1, x", "field 'version'"),
    ],
)
def test_expanded_values_meet_the_same_checks(tmp_path: Path, value: str, problem: str) -> None:
    path = write(tmp_path, ENTRY.replace("version: v1alpha1", "version: ${V}"))
    assert problem in refused(path, env={"V": value})


# -- the CLI: one line on stderr, exit code 2 ----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "watches").glob("invalid-*.yaml")))
def test_check_prints_one_line_and_exits_2(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--watches-file", str(FIXTURES / "watches" / name), "--ansible-roles-path", str(ROLES)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: ")
    assert err.count("\n") == 1


def test_check_of_a_non_utf8_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--watches-file", str(write(tmp_path, b"\xff"))]) == 2
    assert "not UTF-8 text (byte offset 0" in capsys.readouterr().err
