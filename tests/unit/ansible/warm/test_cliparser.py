"""``ansible-playbook``'s parser built once for every run (``compat.cliparser``): the shape it relies on, and
that command lines a run is given parse to the same options, and fail with the same message, through the
shared parser as through a fresh one. The hook changes ``PlaybookCLI`` for the whole process, so the
comparison runs in a child interpreter."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hybrid_operator.ansible import compat
from tests.unit.ansible.warm.speedups import in_child

SWITCH = "HYBRID_OPERATOR_SHARED_CLI_PARSER"
ARGVS = [
    ["ansible-playbook", "-i", "inv", "site.yml"],
    ["ansible-playbook", "-e", "@env/extravars", "-e", "a=1", "--tags", "x", "--tags", "y", "-vvv", "p.yml"],
    ["ansible-playbook", "--skip-tags", "s", "--check", "--diff", "-l", "localhost", "a.yml", "b.yml"],
    ["ansible-playbook", "-i", "inv", "site.yml"],  # again, after lists were parsed: nothing carried over
]

_CHILD = r"""
import contextlib, io, json, os, sys
from ansible.cli.playbook import PlaybookCLI
from hybrid_operator.ansible import compat

argvs = json.loads(sys.argv[2])
if sys.argv[1] == "shared":
    compat.share_cli_parser()
out = []
for argv in argvs:  # each in a fork of this process, as every run is a fork of the zygote
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        cli = PlaybookCLI(list(argv))
        cli.init_parser()
        options = cli.parser.parse_args(argv[1:])
        os.write(write, json.dumps(vars(options), default=str, sort_keys=True).encode())
        for value in vars(options).values():  # what a run may do to what it got: in its own fork only
            if isinstance(value, list):
                value.append("changed by a run")
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        out.append(json.loads(pipe.read()))
    os.wait()
err = io.StringIO()
cli = PlaybookCLI(["ansible-playbook", "--no-such-option"])
cli.init_parser()
with contextlib.redirect_stderr(err):
    try:
        cli.parser.parse_args(["--no-such-option"])
    except SystemExit as exc:
        out.append({"exit": exc.code, "stderr": err.getvalue()})
print(json.dumps(out, default=str))
"""


def _child(mode: str) -> list[Any]:
    out: list[Any] = in_child(_CHILD, mode, json.dumps(ARGVS))
    return out


def test_the_installed_ansible_core_has_the_shape() -> None:
    assert compat.cli_parser_problems(SWITCH) == []


def test_the_switch_leaves_it_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SWITCH, "0")
    assert compat.cli_parser_problems(SWITCH) == [f"{SWITCH}=0"]


def test_a_runs_command_line_parses_the_same_through_the_shared_parser() -> None:
    fresh, shared = _child("fresh"), _child("shared")
    assert shared[:-1] == fresh[:-1]
    assert shared[3] == shared[0]  # the same command line after others: nothing carried over from them
    assert shared[-1] == fresh[-1]  # the same exit code and message for an unknown option
    assert "ansible-playbook: error" in fresh[-1]["stderr"]
    assert fresh[0]["extra_vars"] == []
    assert fresh[1]["tags"] == ["x", "y"]
