"""The zygote's forked child: what it does to become one run's ``ansible-playbook`` (``zygote.ZygoteServer.fork``).

New session, the run's working directory, environment and output file (``forking``), Ansible's process-wide
state reset (``compat``), then ``PlaybookCLI`` in this process (or an ``exec`` of a real ``ansible-playbook``
when the run's environment changes Ansible's configuration) and ``forking.end``, which tells the zygote the
exit status on the run's own pipe once the output is flushed, then ``os._exit``. A spare (``spares``) does
the part that does not depend on the run before its run arrives (``become_spare``).
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
        _detach(close_fds)
        compat.reset_private_state()
        code = _play(run, local_tmp)
    except BaseException:
        traceback.print_exc()
    finally:
        forking.end(code, tell)


def become_spare(spec: int, local_tmp: str, close_fds: list[int], tell: int) -> None:
    """In a child forked before its run: detach and reset what does not depend on the run, then wait for the
    run on ``spec`` (one encoded ``protocol.Run``, then end of file) and become it as ``become_run`` does.
    End of file without a run (the zygote retired it or went away): exit quietly. Never returns."""
    code = 1
    try:
        _detach(close_fds)
        compat.reset_private_state()
        data = _read_all(spec)
        os.close(spec)
        if not data:
            os._exit(0)
        message = protocol.decode(data)
        if not isinstance(message, protocol.Run):
            raise protocol.ProtocolError(f"a spare expects a run, not {type(message).__name__}")
        code = _play(message.run, local_tmp)
    except BaseException:
        traceback.print_exc()
    finally:
        forking.end(code, tell)


def _detach(close_fds: list[int]) -> None:
    """The run's own session (a timeout kills it whole, workers and modules included), default signals, and
    none of the zygote's descriptors (``close_fds``)."""
    os.setsid()
    forking.reset_signals()
    for fd in close_fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _play(run: protocol.RunSpec, local_tmp: str) -> int:
    """The run's output, environment and working directory, then ``ansible-playbook`` in this process (or an
    ``exec`` of the real one for a cold run); its exit code."""
    redirect_output(run.output)
    forking.enter(run.env, run.cwd, replace_env=True)
    program = shutil.which(run.argv[0], path=os.environ.get("PATH")) or run.argv[0]
    if run.cold:  # its environment changes Ansible's configuration: a real ansible-playbook
        os.execve(program, [program, *run.argv[1:]], dict(os.environ))
    compat.use_local_tmp(local_tmp)
    compat.fresh_event_contexts()
    compat.stream_event_partials()  # the events' data in one stream, not a file each
    warnings.filterwarnings("ignore", message=compat.FINDER_WARNING)  # the zygote configured it already
    code = profiling.profiled("run", compat.run_playbook, [program, *run.argv[1:]])
    lean.report(run.output)
    return code
