"""The zygote's forked child: what it does to become one run's ``ansible-playbook`` (``zygote.ZygoteServer.fork``).

New session, the run's working directory, environment and output file (``forking``), Ansible's process-wide
state reset (``compat``), then ``PlaybookCLI`` in this process (or an ``exec`` of a real ``ansible-playbook``
when the run's environment changes Ansible's configuration) and ``forking.end``, which tells the zygote the
exit status on the run's own pipe once the output is flushed, then ``os._exit``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import traceback
import warnings

from hybrid_operator.ansible import compat, forking
from hybrid_operator.ansible.warm import lean, profiling, protocol


def redirect_output(path: str) -> None:
    """stdin from /dev/null; stdout and stderr into one file, as a terminal would interleave them."""
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    forking.redirect(None, out, out)
    os.close(out)
    # Under ansible-runner, stdout is a terminal and so line-buffered: keep the same order of output.
    with contextlib.suppress(Exception):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]


def become_run(run: protocol.RunSpec, local_tmp: str, close_fds: list[int], tell: int) -> None:
    """In the forked child: become the run's ansible-playbook; its exit status goes to ``tell`` too, once its
    output is complete. Never returns."""
    code = 1
    try:
        os.setsid()  # the run's own session: a timeout kills it whole, workers and modules included
        forking.reset_signals()
        for fd in close_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        redirect_output(run.output)
        forking.enter(run.env, run.cwd, replace_env=True)
        program = shutil.which(run.argv[0], path=os.environ.get("PATH")) or run.argv[0]
        if run.cold:  # its environment changes Ansible's configuration: a real ansible-playbook
            os.execve(program, [program, *run.argv[1:]], dict(os.environ))
        compat.reset_private_state()
        compat.use_local_tmp(local_tmp)
        compat.fresh_event_contexts()
        compat.stream_event_partials()  # the events' data in one stream, not a file each
        warnings.filterwarnings("ignore", message=compat.FINDER_WARNING)  # the zygote configured it already
        code = profiling.profiled("run", compat.run_playbook, [program, *run.argv[1:]])
        lean.report(run.output)
    except BaseException:
        traceback.print_exc()
    finally:
        forking.end(code, tell)
