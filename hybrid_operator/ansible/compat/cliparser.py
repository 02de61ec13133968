"""``ansible-playbook``'s command-line parser built once, in the zygote, for every run.

Where it sits: the zygote (``warm.zygote``) calls ``share_cli_parser`` after its warm-up, so every run
inherits it. Each run is ``ansible-playbook ARGV`` in a fresh fork (``state.run_playbook``), and
``CLI.parse`` starts with ``PlaybookCLI.init_parser``, which builds an ``argparse`` parser of ~60 options from
scratch (~3-4 ms of a run); it depends only on the class and on Ansible's configuration, which the zygote
read once for every run. With the hook, ``init_parser`` hands each run the parser the zygote built.
Parsing never changes a parser, and where a run changes what it got (a list default it appends to), it
does so in its own fork: the zygote's parser is never used to parse in the zygote itself, so every run
starts from the parser a fresh ``init_parser`` would have built.

``cli_parser_problems`` checks the shape first: ``init_parser`` sets nothing on the CLI but ``parser``, and a
built-once parser parses a run's command line to the same options as a fresh one.
"""

from __future__ import annotations

import os
from typing import Any

_SAMPLE_ARGV = ["ansible-playbook", "-i", "inventory", "-e", "@env/extravars", "-v", "--check", "site.yml"]


def cli_parser_problems(switch: str) -> list[str]:
    """Why ``share_cli_parser`` is not to be installed: ``switch`` is ``0`` in the environment, or this
    ansible-core's ``PlaybookCLI`` is not the expected shape (empty: it can be)."""
    if os.environ.get(switch) == "0":
        return [f"{switch}=0"]
    try:
        from ansible.cli.playbook import PlaybookCLI

        first, second = PlaybookCLI(list(_SAMPLE_ARGV)), PlaybookCLI(list(_SAMPLE_ARGV))
        before = set(vars(first))
        first.init_parser()
        if set(vars(first)) - before - {"parser"}:
            return [f"PlaybookCLI.init_parser sets more than parser: {sorted(set(vars(first)) - before)}"]
        second.init_parser()
        parsed = [vars(cli.parser.parse_args(_SAMPLE_ARGV[1:])) for cli in (first, first, second)]
        if not parsed[0] == parsed[1] == parsed[2]:
            return ["PlaybookCLI's parser: a second parse differs from a fresh parser's"]
    except (Exception, SystemExit) as exc:  # argparse exits on what it cannot parse
        return [f"{type(exc).__name__}: {exc}"]
    return []


def share_cli_parser() -> Any:
    """Install the hook (see the module docstring; check ``cli_parser_problems`` first); the original."""
    from ansible.cli.playbook import PlaybookCLI

    built = PlaybookCLI(["ansible-playbook"])
    original = PlaybookCLI.init_parser
    original(built)
    parser = built.parser

    def init_parser(self: Any) -> None:
        self.parser = parser

    PlaybookCLI.init_parser = init_parser
    return original
