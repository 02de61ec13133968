"""Deep copies that share immutable tagged values, for every run: the warm executor's cheap ``deepcopy``.

Where it sits: the zygote (``zygote``) calls ``install`` after its warm-up, so every run and every module it
forks inherits it. Ansible deep-copies a lot (each ``lookup('template')`` copies all of the task's variables,
each ``include_tasks`` its file's tasks, each loaded role file its parsed data), and since ansible-core 2.19
every string it loaded is a tagged subclass of ``str`` that ``deepcopy`` rebuilds with a copy of its tags,
where it returns a plain ``str`` as it is. ``compat.share_tagged_scalars`` makes the tagged scalars behave
like the plain ones (why that is safe is written there).

``HYBRID_OPERATOR_SHARED_COPIES=0`` in the operator's environment turns this off (read by the zygote).
``tests/unit/ansible/warm/test_copies.py`` checks the shape and what a copy shares.
"""

from __future__ import annotations

import os

from hybrid_operator.ansible import compat

DISABLE_ENV = "HYBRID_OPERATOR_SHARED_COPIES"


def install() -> list[str]:
    """Share tagged scalars in this process's deep copies; why not (then copies rebuild them, as before)."""
    if os.environ.get(DISABLE_ENV) == "0":
        return [f"{DISABLE_ENV}=0"]
    problems = compat.datatag_problems()
    if not problems:
        compat.share_tagged_scalars()
    return problems
