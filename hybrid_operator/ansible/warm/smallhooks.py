"""The small hooks every run inherits from the zygote, each taking one piece of per-run work away.

Where it sits: the zygote (``zygote``) calls ``install`` once, after its warm-up and before it parses the
roles, so every run it forks inherits them. Each hook is exact (a run gives what Ansible's own path gives),
is checked against this ansible-core's shape before it goes in, and has a switch in the operator's
environment; a hook that cannot or may not go in says why on the zygote's stderr (the operator's log), and
runs do that piece of work as Ansible does. What each saves and how it was measured:
docs/internals/performance.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import copies, tmpdirs
from hybrid_operator.kube.runclient import KUBE_CLIENT_HOOKS_ENV
from hybrid_operator.kube.runclient import install as install_run_client

FACTS_HOOK_ENV = "HYBRID_OPERATOR_FACTS_HOOK"  # "0": every task cleans the host's facts, as Ansible does
CLI_PARSER_ENV = "HYBRID_OPERATOR_SHARED_CLI_PARSER"  # "0": every run builds ansible-playbook's parser
FACT_CACHE_HOOK_ENV = "HYBRID_OPERATOR_FACT_CACHE_HOOK"  # "0": every set_fact saves the fact cache file
TEMPLATE_LOOKUP_HOOK_ENV = "HYBRID_OPERATOR_TEMPLATE_LOOKUP_HOOK"  # "0": lookup('template') deep-copies
STACK_WALK_HOOK_ENV = "HYBRID_OPERATOR_STACK_WALK_HOOK"  # "0": each deprecation describes the whole stack
# The hooks of ``compat`` with a switch: (why not, install, switch, what a run does without it).
_SWITCHED: tuple[tuple[Callable[[str], list[str]], Callable[[], object], str, str], ...] = (
    (compat.no_facts_problems, compat.skip_cleaning_no_facts, FACTS_HOOK_ENV, "a host's facts cleaned for every task"),
    (compat.cli_parser_problems, compat.share_cli_parser, CLI_PARSER_ENV, "each run builds the command line's parser"),
    (
        compat.unchanged_fact_write_problems,
        compat.skip_unchanged_fact_writes,
        FACT_CACHE_HOOK_ENV,
        "the fact cache file saved by every set_fact",
    ),
    (
        compat.template_lookup_problems,
        compat.copy_template_variables_shallow,
        TEMPLATE_LOOKUP_HOOK_ENV,
        "every variable deep-copied by each lookup('template')",
    ),
    (
        compat.stack_walk_problems,
        compat.walk_stack_lazily,
        STACK_WALK_HOOK_ENV,
        "each deprecation and warning describes every frame of the stack",
    ),
)


def install() -> None:
    """Install every small hook this ansible-core and the environment allow; one stderr line for each not."""
    if problems := tmpdirs.install():  # actions that transfer files make their temp dir with a shell
        print(f"zygote: temp dirs through the shell: {'; '.join(problems)}", file=sys.stderr)
    if problems := copies.install():  # deep copies rebuild every tagged string
        print(f"zygote: deep copies rebuild tagged values: {'; '.join(problems)}", file=sys.stderr)
    if os.environ.get(KUBE_CLIENT_HOOKS_ENV) != "0" and (problems := install_run_client()):
        print(f"zygote: the kubernetes client parses and formats as usual: {'; '.join(problems)}", file=sys.stderr)
    for why_not, install_hook, switch, without in _SWITCHED:
        if problems := why_not(switch):
            print(f"zygote: {without}: {'; '.join(problems)}", file=sys.stderr)
        else:
            install_hook()
