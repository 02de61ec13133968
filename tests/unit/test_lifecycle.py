"""The lifecycle's owner: groups start in order and stop in reverse within one deadline, a failed start
stops what started, the leader's group waits for ``lead``, readiness comes from the parts, and signals
(many, back to back) only ask to stop."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from hybrid_operator.errors import OperatorError
from hybrid_operator.lifecycle import CLEANUP, Closing, Group, Lifecycle, Loop


class Part:
    """A runnable that writes what happens to it into ``journal``."""

    def __init__(
        self, name: str, journal: list[str], *, fails: bool = False, stop_takes: float = 0.0, ready: bool = True
    ) -> None:
        self.name, self.journal, self.fails, self.stop_takes, self.is_ready = name, journal, fails, stop_takes, ready
        self.deadline: float | None = None

    def start(self) -> None:
        self.journal.append(f"start {self.name}")
        if self.fails:
            raise OperatorError(f"{self.name} cannot start")

    def stop(self, deadline: float) -> bool:
        self.journal.append(f"stop {self.name}")
        self.deadline = deadline
        pause = min(self.stop_takes, max(0.0, deadline - time.monotonic()))
        time.sleep(pause)
        return pause >= self.stop_takes

    def ready(self) -> tuple[bool, str]:
        return self.is_ready, "ok" if self.is_ready else "not yet"


@pytest.fixture
def lifecycle() -> Iterator[Lifecycle]:
    owner = Lifecycle(grace=5)
    yield owner
    owner.close()


def in_a_moment(action: object, after: float = 0.05) -> threading.Timer:
    timer = threading.Timer(after, action)  # type: ignore[arg-type]
    timer.start()
    return timer


def test_groups_start_in_order_and_stop_in_reverse(lifecycle: Lifecycle) -> None:
    journal: list[str] = []
    # Added out of order: the groups decide, and the order of adding within a group.
    lifecycle.add(Group.LEADING, "workers", Part("workers", journal))
    lifecycle.add(Group.SERVERS, "probes", Part("probes", journal))
    lifecycle.add(Group.OTHERS, "executor", Part("executor", journal))
    lifecycle.add(Group.LEADING, "watches", Part("watches", journal))
    lifecycle.add(Group.SERVERS, "proxy", Part("proxy", journal))
    in_a_moment(lifecycle.request_stop)
    assert lifecycle.run() == 0
    assert journal == [
        "start probes",
        "start proxy",
        "start executor",
        "start workers",
        "start watches",
        "stop watches",
        "stop workers",
        "stop executor",
        "stop proxy",
        "stop probes",
    ]


def test_a_runnable_that_fails_to_start_stops_the_ones_already_started(lifecycle: Lifecycle) -> None:
    journal: list[str] = []
    lifecycle.add(Group.SERVERS, "probes", Part("probes", journal))
    lifecycle.add(Group.OTHERS, "executor", Part("executor", journal, fails=True))
    lifecycle.add(Group.LEADING, "workers", Part("workers", journal))
    assert lifecycle.run() == 1
    assert journal == ["start probes", "start executor", "stop workers", "stop executor", "stop probes"]
    # The workers never started; stopping them releases what building them took (a runnable's promise).


def test_one_deadline_for_the_whole_stop_and_every_part_still_stopped(lifecycle: Lifecycle) -> None:
    journal: list[str] = []
    lifecycle.grace = 0.4
    servers, slow, fast = Part("probes", journal), Part("workers", journal, stop_takes=10), Part("watches", journal)
    lifecycle.add(Group.SERVERS, "probes", servers)
    lifecycle.add(Group.LEADING, "workers", slow)
    lifecycle.add(Group.LEADING, "watches", fast)
    lifecycle.start_all()
    began = time.monotonic()
    assert lifecycle.stop() is False  # the workers did not finish in time
    took = time.monotonic() - began
    assert 0.25 < took < 2
    assert journal[-3:] == ["stop watches", "stop workers", "stop probes"]
    assert fast.deadline == slow.deadline  # the leader's group shares one deadline...
    assert servers.deadline is not None and slow.deadline is not None
    assert servers.deadline - slow.deadline == pytest.approx(0.1)  # ... a quarter of the grace before the end
    assert lifecycle.stop() is True  # stopping again does nothing
    assert journal.count("stop probes") == 1


def test_the_drain_leaves_the_cleanup_its_seconds_of_a_long_grace_period() -> None:
    parts: list[Part] = []
    with Lifecycle(grace=30) as owner:
        for group in (Group.SERVERS, Group.LEADING):
            parts.append(Part(group.name, []))
            owner.add(group, group.name, parts[-1])
        owner.stop()
    servers, workers = parts
    assert servers.deadline is not None and workers.deadline is not None
    assert servers.deadline - workers.deadline == pytest.approx(CLEANUP)


def test_the_leaders_group_waits_for_lead_and_stands_by_ready(lifecycle: Lifecycle) -> None:
    journal: list[str] = []
    lifecycle.add(Group.OTHERS, "executor", Part("executor", journal), check="executor")
    lifecycle.add(Group.ELECTION, "elector", Part("elector", journal), check="leader")
    lifecycle.add(Group.LEADING, "watches", Part("watches", journal, ready=False), check="watches")
    assert lifecycle.checks["executor"]() == (False, "starting")
    seen: dict[str, tuple[bool, str]] = {}

    def look_then_lead() -> None:
        seen.update({name: check() for name, check in lifecycle.checks.items()})
        lifecycle.lead()
        in_a_moment(lifecycle.request_stop, 0.1)

    in_a_moment(look_then_lead, 0.1)
    assert lifecycle.run() == 0
    assert seen == {
        "executor": (True, "ok"),
        "leader": (True, "ok"),
        "watches": (True, "standing by: starts when this replica leads"),
    }
    assert journal[:3] == ["start executor", "start elector", "start watches"]
    assert lifecycle.checks["watches"]() == (False, "stopping")


def test_a_stop_asked_while_standing_by_starts_nothing_more(lifecycle: Lifecycle) -> None:
    journal: list[str] = []
    lifecycle.add(Group.ELECTION, "elector", Part("elector", journal))
    lifecycle.add(Group.LEADING, "workers", Part("workers", journal))
    in_a_moment(lambda: lifecycle.request_stop(1))
    assert lifecycle.run() == 1
    assert journal == ["start elector", "stop workers", "stop elector"]


def test_readiness_is_each_parts_own_once_started(lifecycle: Lifecycle) -> None:
    journal: list[str] = []
    lifecycle.add(Group.OTHERS, "executor", Part("executor", journal, ready=False), check="executor")
    lifecycle.start_all()
    assert lifecycle.checks["executor"]() == (False, "not yet")


def test_signals_back_to_back_only_ask_to_stop(lifecycle: Lifecycle) -> None:
    """The deadlock this replaces: a second signal inside the first handler's ``Event.set`` waited forever
    for the lock its own thread held. Now a handler does nothing: the signals land in a pipe."""
    journal: list[str] = []
    lifecycle.add(Group.SERVERS, "probes", Part("probes", journal))
    lifecycle.add(Group.LEADING, "workers", Part("workers", journal, stop_takes=0.2))
    lifecycle.record_signals()

    def storm() -> None:
        for _ in range(200):
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)

    in_a_moment(storm)
    began = time.monotonic()
    assert lifecycle.run() == 0
    assert time.monotonic() - began < 3
    assert journal == ["start probes", "start workers", "stop workers", "stop probes"]
    storm()  # during and after the stop: still only recorded, nothing raised or waited for


def test_close_gives_the_signals_back() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with Lifecycle(grace=1) as owner:
        owner.record_signals()
        assert signal.getsignal(signal.SIGTERM) not in before
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_loop_runs_until_stopped_and_its_stop_waits_for_it() -> None:
    ticks: list[int] = []

    def tick(stopping: threading.Event) -> None:
        while not stopping.wait(0.01):
            ticks.append(1)
        time.sleep(0.05)  # some last work: stop waits for it

    loop = Loop("ticker", tick)
    assert loop.ready() == (False, "not started")
    loop.start()
    loop.start()  # once only
    time.sleep(0.05)
    assert loop.ready() == (True, "running")
    assert loop.stop(time.monotonic() + 5)
    assert not loop.alive and ticks
    assert Loop("never", tick).stop(time.monotonic()) is True


def test_closing_closes_at_stop() -> None:
    closed: list[bool] = []
    with Lifecycle(grace=1) as owner:
        owner.add(Group.OTHERS, "scratch", Closing(lambda: closed.append(True)))
        assert owner.start_all()
        assert closed == []
    assert closed == [True]
