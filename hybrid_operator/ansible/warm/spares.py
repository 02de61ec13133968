"""The zygote's spare: the next run's child, forked before that run arrives.

Where it sits: ``zygote.ZygoteServer`` keeps one spare while it serves. A run's start used to pay, after
its request arrived, for the zygote's ``fork()`` (copying the page tables of a process holding a warm
Ansible: ~5-7 ms on the test machine), the run's temporary directory and the child's detaching and
resetting of Ansible's process-wide state (``child.become_spare`` does those before it waits). The spare
has done all that already; ``hand_over`` writes it the run (one encoded ``protocol.Run`` on a pipe of its
own) and it goes on exactly as a freshly forked child would (``child._play``). The zygote forks the next
spare once no run is running: a fork beside a running run slowed that run down about as much as it saved
the next one (the fork and the run's copy-on-write faults work on the same pages).

Nothing of a run reaches a spare before its hand-over, and a spare is forked from the zygote's settled
state like any run, so a run in a spare is the run a fresh fork would have been (the zygote's state does
not change while it serves). A spare that died is reaped and replaced; a hand-over that fails falls back
to a fresh fork. ``HYBRID_OPERATOR_SPARE_RUN=0`` in the operator's environment turns spares off (read by
the zygote): every run is forked when it arrives, as before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from dataclasses import dataclass

from hybrid_operator.ansible import forking
from hybrid_operator.ansible.privatedirs import new_temp_dir
from hybrid_operator.ansible.warm import child, protocol

DISABLE_ENV = "HYBRID_OPERATOR_SPARE_RUN"


def wanted() -> bool:
    return os.environ.get(DISABLE_ENV) != "0"


@dataclass(frozen=True)
class Spare:
    pid: int
    spec: int  # the write end of the pipe it reads its run from
    done: int  # the read end of its done pipe (``forking.end``), as for any run
    local_tmp: str


def fork_spare(tmp_root: str, close_fds: list[int]) -> Spare:
    """Fork a spare; ``close_fds``: the zygote's descriptors it must not keep."""
    local_tmp = str(new_temp_dir("run-", tmp_root))
    done_r, done_w = os.pipe()
    spec_r, spec_w = os.pipe()
    forking.flush_std()
    pid = os.fork()
    if pid == 0:
        child.become_spare(spec_r, local_tmp, [*close_fds, done_r, spec_w], done_w)
    os.close(done_w)
    os.close(spec_r)
    return Spare(pid, spec_w, done_r, local_tmp)


def hand_over(spare: Spare, message: protocol.Run) -> bool:
    """Give ``spare`` its run and close its pipe; False if it is gone (the caller forks the run afresh, the
    spare is reaped as any child)."""
    data = protocol.encode(message)
    try:
        if _exited(spare.pid):
            return False
        while data:
            data = data[os.write(spare.spec, data) :]
    except OSError:  # BrokenPipeError: it died while it waited
        return False
    finally:
        os.close(spare.spec)
    return True


def _exited(pid: int) -> bool:
    """Whether the child ``pid`` has exited (without reaping it: the zygote's reaper does, as for any child)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


class Slot:
    """The zygote's one spare, if any: forked ahead, handed a run, dropped when it died or the zygote stops."""

    def __init__(self) -> None:
        self.on = wanted()
        self.spare: Spare | None = None

    def fds(self) -> list[int]:
        """Its descriptors held by the zygote (another forked child must close them)."""
        return [] if self.spare is None else [self.spare.spec, self.spare.done]

    def fill(self, tmp_root: str, close_fds: list[int]) -> Spare | None:
        """Fork a spare unless there is one or spares are off; the new spare (the zygote removes its temp
        dir when it reaps it), else None."""
        if not self.on or self.spare is not None:
            return None
        try:
            self.spare = fork_spare(tmp_root, close_fds)
        except OSError as exc:  # out of processes or memory now: the next run is forked when it comes
            print(f"zygote: could not fork a spare: {exc}", file=sys.stderr)
            return None
        return self.spare

    def take(self, message: protocol.Run) -> Spare | None:
        """Hand ``message`` to the spare: the spare now running it (its pid and done pipe are the run's), or
        None (there was none, or it died: fork the run afresh; the dead one is reaped as any child)."""
        spare, self.spare = self.spare, None
        if spare is None:
            return None
        if not hand_over(spare, message):
            os.close(spare.done)
            return None
        return spare

    def reaped(self, pid: int) -> None:
        """A child was reaped: if it was the spare (it died waiting), forget it; the next run forks afresh."""
        if self.spare is not None and pid == self.spare.pid:
            self.drop()

    def stop(self) -> None:
        """The zygote stops: kill the spare and reap it."""
        if self.spare is not None:
            pid = self.spare.pid
            self.drop()
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)

    def drop(self) -> None:
        """Forget the spare, closing the zygote's ends of its pipes."""
        if self.spare is not None:
            with contextlib.suppress(OSError):  # end of file: a spare still waiting exits by itself
                os.close(self.spare.spec)
            os.close(self.spare.done)
            self.spare = None
