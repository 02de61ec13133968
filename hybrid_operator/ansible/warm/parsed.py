"""Role YAML parsed once, in the zygote, for every run: the warm executor's parsed-file cache.

Where it sits: the zygote (``project.prepare_roles``) calls ``install`` and then ``parse`` with the
roles' YAML files (``project.role_files``) after its warm-up. Every run is a fresh fork, so before this each
run read and parsed the YAML of its role (tasks, handlers, defaults, vars, meta: for ``roles/foo`` 7 files,
~5 ms of CPU, and more for roles of hundreds of tasks) although the files had not changed since the last
run. Now ``DataLoader.load_from_file`` answers role loading from what the zygote parsed, as long as the file
is still the one it parsed (``compat.hook_parsed_files``: what counts as unchanged, and why callers still
get their own copy, is written there); an edited, replaced or new file is read by the run as before, and
the zygote keeps what it parsed (a changed role costs its runs the parse they always paid).

``HYBRID_OPERATOR_PARSED_FILES=0`` in the operator's environment turns this off (read by the zygote).
``tests/unit/ansible/warm/test_parsed.py`` checks the shape it relies on and that an edit is picked up.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hybrid_operator.ansible import compat

DISABLE_ENV = "HYBRID_OPERATOR_PARSED_FILES"
PARSED: list[compat.ParsedFiles] = []  # the installed cache (one per process)


def install() -> list[str]:
    """Hook this process's Ansible (see the module docstring); why it could not (then every run parses its
    role's files itself, as before). Once per process."""
    if PARSED:
        return []
    if os.environ.get(DISABLE_ENV) == "0":
        return [f"{DISABLE_ENV}=0"]
    problems = compat.loader_hook_problems()
    if not problems:
        parsed = compat.ParsedFiles()
        compat.hook_parsed_files(parsed)
        PARSED.append(parsed)
    return problems


def parse(paths: Iterable[Path]) -> list[Any]:
    """Parse these files ahead for every run (when installed); their parsed data, for ``templates.warm``
    (read here once either way)."""
    parsed = PARSED[0] if PARSED else compat.ParsedFiles()
    compat.parse_ahead([str(path) for path in paths], parsed)
    return parsed.contents()
