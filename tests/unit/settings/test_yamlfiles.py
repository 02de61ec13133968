"""Reading YAML from outside with bounds: size, encoding, depth, aliases, duplicate keys, tags; the playbook check."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hybrid_operator.errors import ConfigError
from hybrid_operator.settings.yamlfiles import (
    MAX_BYTES,
    MAX_DEPTH,
    PLAYBOOK_MAX_DEPTH,
    YamlError,
    _below_libyamls_limit,
    load,
    playbook_problem,
    read_text,
)

SOURCE = Path("watches.yaml")


# -- read_text: size and encoding ----------------------------------------------------------------------


def test_a_50_mb_file_is_refused_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as stream:
        stream.truncate(50 << 20)  # sparse: the size is there without writing 50 MB
    with pytest.raises(ConfigError, match=r"is 52428800 bytes, over the limit of 1 MiB"):
        read_text(path, what="watches file")


def test_a_file_at_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_bytes(b"#" * MAX_BYTES)
    assert len(read_text(path)) == MAX_BYTES


def test_a_device_without_size_is_read_only_up_to_the_limit() -> None:
    zero = Path("/dev/zero")
    if not zero.exists():
        pytest.skip("no /dev/zero here")
    with pytest.raises(ConfigError, match="over the limit of 1 MiB"):
        read_text(zero)


def test_non_utf8_names_the_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_bytes(b"- version: v1\n  kind: \xff\xfeFoo\n")
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte offset 22: invalid start byte\)"):
        read_text(path, what="watches file")


def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_bytes("\ufeff- a\n".encode())
    assert read_text(path) == "- a\n"


def test_a_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read watches file"):
        read_text(tmp_path, what="watches file")


# -- load: what is refused, and where ------------------------------------------------------------------


def nested(depth: int) -> str:
    """A document of ``depth`` nested flow sequences."""
    return "[" * depth + "]" * depth


def test_nesting_up_to_the_limit_is_read() -> None:
    data = load(nested(MAX_DEPTH), source=SOURCE)
    for _ in range(MAX_DEPTH - 1):
        data = data[0]
    assert data == []


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 100_000])
def test_nesting_beyond_the_limit_is_refused(depth: int) -> None:
    with pytest.raises(YamlError, match=f"nested deeper than {MAX_DEPTH} levels") as caught:
        load(nested(depth), source=SOURCE)
    assert caught.value.path == (0,) * MAX_DEPTH
    assert caught.value.where == f"line 1, column {MAX_DEPTH + 1}"


def test_aliases_are_refused_with_the_path_and_the_item() -> None:
    text = "- kind: Foo\n  version: v1\n  vars:\n    a: &x [1, 2]\n    b: *x\n"
    with pytest.raises(YamlError, match=r"anchors and aliases \(&name, \*name\) are not allowed") as caught:
        load(text, source=SOURCE)
    assert caught.value.path == (0, "vars", "a")
    assert caught.value.item == {"kind": "Foo", "version": "v1"}
    assert caught.value.where == "line 4, column 8"


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 20)]
    with pytest.raises(YamlError, match="anchors and aliases"):
        load("\n".join(lines), source=SOURCE)


def test_duplicate_keys_are_refused() -> None:
    with pytest.raises(YamlError, match="duplicate key 'a'") as caught:
        load("- x: {a: 1, 'a': 2}\n", source=SOURCE)
    assert caught.value.path == (0, "x", "a")


def test_equal_keys_of_different_types_are_not_duplicates() -> None:
    assert load("{1: int, '1': str}", source=SOURCE) == {1: "int", "1": "str"}


def test_a_merge_key_may_repeat_what_it_merges() -> None:
    assert load("{<<: {a: 1, b: 2}, a: 3}", source=SOURCE) == {"a": 3, "b": 2}


@pytest.mark.parametrize(
    "value",
    ["!!binary aGVsbG8=", "!!set {a}", "!!omap [{a: 1}]", "!!timestamp 2024-01-01", "!!python/name:os.system ''"],
)
def test_tags_beyond_json_types_are_refused(value: str) -> None:
    with pytest.raises(YamlError, match="is not allowed") as caught:
        load(f"- vars: {{v: {value}}}\n", source=SOURCE)
    assert caught.value.path == (0, "vars", "v")


def test_custom_tags_are_refused() -> None:
    with pytest.raises(YamlError, match="tag !vault is not allowed"):
        load("a: !vault xyz\n", source=SOURCE)


def test_json_tags_and_plain_scalars_are_read() -> None:
    text = "{s: !!str 1, i: !!int '2', f: !!float '1.5', b: !!bool 'true', n: !!null '', l: !!seq [], m: !!map {}}"
    assert load(text, source=SOURCE) == {"s": "1", "i": 2, "f": 1.5, "b": True, "n": None, "l": [], "m": {}}


def test_dates_stay_strings() -> None:
    assert load("{d: 2024-01-01, t: 2001-12-14t21:59:43.10-05:00}", source=SOURCE) == {
        "d": "2024-01-01",
        "t": "2001-12-14t21:59:43.10-05:00",
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: " + "9" * 5000, "line 1, column 4: cannot read tag:yaml.org,2002:int"),
        ("a: !!int ''", "cannot read tag:yaml.org,2002:int"),
        ("a: !!bool maybe", "cannot read tag:yaml.org,2002:bool"),
        ("a: !!float x", "cannot read tag:yaml.org,2002:float"),
        ("{[1]: 2}", "unhashable key"),
        ("a: \ud800", "not valid YAML"),
        ("a: \x00", "not valid YAML"),
        ("- a\n---\n- b\n", "expected a single document"),
        ("- version: v1\n  kind: [Foo\n  role: x\n", "line 3, column 7"),
    ],
)
def test_what_pyyaml_raises_becomes_one_line_yaml_error(text: str, problem: str) -> None:
    with pytest.raises(YamlError, match="not valid YAML") as caught:
        load(text, source=SOURCE)
    assert problem in str(caught.value)
    assert "\n" not in str(caught.value)


def test_syntax_error_names_where_the_construct_began() -> None:
    with pytest.raises(YamlError) as caught:
        load("- version: v1\n  kind: [Foo\n  role: x\n", source=SOURCE)
    assert "(while parsing a flow sequence at line 2, column 9)" in str(caught.value)


# -- playbook_problem ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "- hosts: localhost\n  tasks: []\n",
        "- name: x\n  hosts: all\n- import_playbook: other.yml\n- ansible.builtin.import_playbook: more.yml\n",
        "- &play {hosts: all, tasks: [{debug: {msg: !unsafe '{{ x }}'}}]}\n- *play\n",
        "[{hosts: all}]",
    ],
)
def test_playbooks_are_recognised(text: str) -> None:
    assert playbook_problem(text) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n", "not a list of plays"),
        ("memcached_port: 11211\n", "not a list of plays"),
        ("", "empty"),
        ("[]", "empty"),
        ("- hosts: all\n- just a string\n", "play 2 is not a mapping"),
        ("- name: no hosts\n  tasks: []\n", "play 1 has neither 'hosts' nor 'import_playbook'"),
        ("- hosts: all\n---\n- hosts: all\n", "more than one YAML document"),
        ("- hosts: [all\n", "not valid YAML: line 2, column 1"),
        ("\x00", "not valid YAML"),
    ],
)
def test_what_is_not_a_playbook_says_why(text: str, problem: str) -> None:
    found = playbook_problem(text)
    assert found is not None
    assert problem in found


def test_a_playbook_may_nest_deeper_than_watches_yaml() -> None:
    assert playbook_problem("- hosts: all\n  vars: {a: " + nested(PLAYBOOK_MAX_DEPTH - 3) + "}\n") is None


@pytest.mark.parametrize("depth", [PLAYBOOK_MAX_DEPTH, 1_000_000])
def test_a_playbook_nested_too_deep_is_refused(depth: int) -> None:
    found = playbook_problem("- hosts: all\n  vars: {a: " + nested(depth) + "}\n")
    assert found == f"nested deeper than {PLAYBOOK_MAX_DEPTH} levels"


# -- libyaml's own nesting limit (PyYAML >= 6.0.4 wheels) ----------------------------------------------


def _libyamls_refusal(column: int) -> yaml.MarkedYAMLError:
    mark = yaml.Mark("<text>", column, 0, column, None, None)
    return yaml.MarkedYAMLError(problem="exceeded maximum nesting depth", problem_mark=mark)


def test_data_read_from_the_shortened_text_is_never_returned() -> None:
    seen: list[str] = []

    def read(part: str) -> object:
        seen.append(part)
        if len(seen) == 1:
            raise _libyamls_refusal(3)
        return ["shortened"]

    with pytest.raises(yaml.MarkedYAMLError, match="exceeded maximum nesting depth"):
        _below_libyamls_limit(read, "[[[[]]]]")
    assert seen == ["[[[[]]]]", "[[["]


def test_other_errors_are_not_retried() -> None:
    calls = 0

    def read(part: str) -> object:
        nonlocal calls
        calls += 1
        raise yaml.MarkedYAMLError(
            problem="did not find expected ','", problem_mark=yaml.Mark("t", 1, 0, 1, None, None)
        )

    with pytest.raises(yaml.MarkedYAMLError, match="expected ','"):
        _below_libyamls_limit(read, "[a b]")
    assert calls == 1
