"""A variant of the warm executor's zygote, for ``bench/executors.py --warm-up child``: the warm-up playbook
runs in a forked child instead of in the zygote itself, which shows what the zygote's own warm-up buys
(a child's warm-up warms only the disk cache: every run then pays Ansible's start-up again).

``WarmExecutor(settings, server=SERVER)`` starts it as ``python -P bench/zygotes.py --fd N``. Its self-test
then compares two forked runs (the zygote never ran the playbook itself); production never starts it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hybrid_operator.ansible.warm import protocol, zygote

SERVER = (str(Path(__file__).resolve()),)


class ChildWarmUp(zygote.ZygoteServer):
    """The zygote, warmed up by a forked child instead of by itself."""

    warms_up_in_itself = False

    def warm_up(self, run: protocol.RunSpec) -> int:
        pid = self.fork(run)
        _pid, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(zygote.main(server=ChildWarmUp))
