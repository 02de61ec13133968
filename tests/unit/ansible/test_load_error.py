"""A run that fails before any task reports Ansible's own error text, not the tail of its output."""

from __future__ import annotations

from pathlib import Path

from hybrid_operator.ansible.running import load_error

UNKNOWN_MODULE = (
    "[ERROR]: couldn't resolve module/action 'operator_sdk.util.osdk_metric'. This often indicates a "
    "misspelling, missing collection, or incorrect module path.\n"
    """Origin: /project/roles/memcached/tasks/main.yml:60:7

58        state: touch
59     # Sanity
60     - name: create sanity_counter
         ^ column 7
"""
)

SYNTAX = """ERROR! We were unable to read either as JSON nor YAML, these are the errors we got from each:
JSON: Expecting value: line 1 column 1 (char 0)

The error appears to be in '/project/roles/x/tasks/main.yml': line 3, column 1
"""


def test_the_error_paragraph_names_the_module_and_where(tmp_path: Path) -> None:
    out = tmp_path / "stdout"
    out.write_text(UNKNOWN_MODULE)
    text = load_error(out)
    assert "couldn't resolve module/action 'operator_sdk.util.osdk_metric'" in text
    assert "main.yml:60:7" in text
    assert "column 7" not in text


def test_old_style_errors_too(tmp_path: Path) -> None:
    out = tmp_path / "stdout"
    out.write_text("PLAY [x]\n" + SYNTAX)
    assert load_error(out).startswith("ERROR! We were unable to read")


def test_without_an_error_line_the_last_lines_and_a_bound(tmp_path: Path) -> None:
    out = tmp_path / "stdout"
    out.write_text("\\n".join(f"line {i}" for i in range(20)) + "\n" + "[ERROR]: " + "x" * 5000)
    assert len(load_error(out)) <= 1000
    (tmp_path / "plain").write_text("a\nb\n")
    assert load_error(tmp_path / "plain") == "a | b"
    assert load_error(tmp_path / "missing") == "the Ansible run failed before it started"
