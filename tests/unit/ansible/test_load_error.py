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


USAGE = """usage: ansible-playbook [-h] [--version] [-v] [--private-key PRIVATE_KEY_FILE]
                        [-u REMOTE_USER] [-c CONNECTION] [-T TIMEOUT]
                        playbook [playbook ...]
ansible-playbook: error: unrecognized arguments: --vault-pasword-file /opt/ansible/pwd.yml
usage: ansible-playbook [-h] [--version] [-v] [--private-key PRIVATE_KEY_FILE]
                        playbook [playbook ...]

Runs Ansible playbooks, executing the defined tasks on the targeted hosts.

positional arguments:
  playbook              Playbook(s)

options:
  --flush-cache         clear the fact cache for every host in inventory
  -v, --verbose         Causes Ansible to print more debug messages. Adding
                        multiple -v will increase the verbosity.

Privilege Escalation Options:
  control how and which user you become as on target hosts

  -b, --become          run operations with become (does not imply password
                        prompting)
"""


def test_a_refused_command_line_gives_the_parsers_error_line_not_the_help(tmp_path: Path) -> None:
    out = tmp_path / "stdout"
    out.write_text(USAGE.replace("\n", "\r\n"))  # ansible-runner reads its child through a terminal
    assert load_error(out) == (
        "ansible-playbook: error: unrecognized arguments: --vault-pasword-file /opt/ansible/pwd.yml"
    )


def test_ansibles_own_error_wins_over_a_parser_line(tmp_path: Path) -> None:
    out = tmp_path / "stdout"
    out.write_text(
        "[WARNING]: Error getting vault password file (default): not found\n"
        "[ERROR]: The vault password file /opt/ansible/pwd.yml was not found\n"
    )
    assert load_error(out) == "[ERROR]: The vault password file /opt/ansible/pwd.yml was not found"


def test_a_help_text_without_an_error_line_is_left_out_of_the_tail(tmp_path: Path) -> None:
    out = tmp_path / "stdout"
    no_error_line = "\n".join(line for line in USAGE.splitlines() if ": error:" not in line)
    out.write_text("Traceback (most recent call last):\nSystemExit: 2\n" + no_error_line + "\n")
    assert load_error(out) == "Traceback (most recent call last): | SystemExit: 2"


def test_a_long_parser_line_is_bounded(tmp_path: Path) -> None:
    out = tmp_path / "stdout"
    out.write_text("ansible-playbook: error: unrecognized arguments: " + "-x " * 2000 + "\n")
    text = load_error(out)
    assert len(text) <= 1000
    assert text.startswith("ansible-playbook: error: unrecognized arguments: -x")
