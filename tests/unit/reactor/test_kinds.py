"""The watched kinds: discovery (waiting for a CRD), one informer per namespace, and which watch events
become queue keys, at which priority; the /readyz check. A fake API server scripts discovery, lists and
one watch per informer; a recording queue shows what was enqueued. Informer threads run for real, but
every wait is cut to milliseconds."""

from __future__ import annotations

import argparse
import logging
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hybrid_operator.kube.client import ApiError, KubeObject, Resource
from hybrid_operator.kube.objects import GVK
from hybrid_operator.reactor.kinds import Kinds
from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, PRIORITY_RESYNC, Key
from hybrid_operator.settings.config import Config, add_run_flags
from hybrid_operator.settings.watches import Target, Watch
from tests.fakes import FakeKube
from tests.helpers import wait_until

MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
GVK_TEXT = str(MEMCACHED)
NAMESPACED = Resource(MEMCACHED, "memcacheds", True)
CLUSTER_WIDE = Resource(MEMCACHED, "memcacheds", False)
ALL = "/apis/cache.example.com/v1alpha1/memcacheds"


def cr(name: str, rv: str, *, namespace: str = "ns", generation: int = 1, observed: int | None = None) -> KubeObject:
    obj: KubeObject = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "generation": generation,
        }
    }
    if observed is not None:
        obj["status"] = {"observedGeneration": observed}
    return obj


class Stop(threading.Event):
    """Waits are recorded and cut short, so backoffs of seconds take milliseconds."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        super().wait(min(timeout or 0.0, 0.002))
        return self.is_set()


class RecordingQueue:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Key, int | None]] = []
        self._lock = threading.Lock()

    def add(self, key: Key, *, delay: float = 0.0, priority: int = PRIORITY_CHANGE) -> None:
        with self._lock:
            self.calls.append(("add", key, priority))

    def discard(self, key: Key) -> None:
        with self._lock:
            self.calls.append(("discard", key, None))


class RecordingCaches:
    def __init__(self) -> None:
        self.informers: list[Any] = []

    def add(self, informer: Any) -> None:
        self.informers.append(informer)


def config(namespaces: str = "") -> Config:
    parser = argparse.ArgumentParser()
    add_run_flags(parser)
    return Config.from_args(parser.parse_args([]), env={"WATCH_NAMESPACE": namespaces} if namespaces else {})


class Setup:
    def __init__(
        self,
        discovery: list[Resource | ApiError],
        *,
        namespaces: str = "",
        owns: Callable[[str], bool] = lambda uid: True,
        resumer: Any = None,
        watch: Watch | None = None,
    ) -> None:
        self.stop = Stop()
        self.kube = FakeKube(NAMESPACED, discovery=discovery, stop=self.stop)
        self.queue = RecordingQueue()
        self.caches = RecordingCaches()
        self.watch = watch or Watch(gvk=MEMCACHED, target=Target(role="memcached"))
        self.kinds = Kinds(
            config(namespaces),
            [self.watch],
            self.kube,  # type: ignore[arg-type]
            self.queue,  # type: ignore[arg-type]
            self.caches,  # type: ignore[arg-type]
            self.stop,
            owns,
            resumer,
        )


@pytest.fixture
def setups() -> Iterator[list[Setup]]:
    made: list[Setup] = []
    yield made
    for setup in made:
        setup.stop.set()


def key(name: str, namespace: str = "ns") -> Key:
    return Key(GVK_TEXT, namespace, name)


def test_listed_objects_are_enqueued_converged_ones_after_new_work(setups: list[Setup]) -> None:
    setup = Setup([NAMESPACED])
    setups.append(setup)
    setup.kube.lists[ALL] = {
        "metadata": {"resourceVersion": "10"},
        "items": [cr("done", "5", generation=2, observed=2), cr("new", "6")],
    }
    setup.kinds.start()
    wait_until(lambda: len(setup.queue.calls) == 2, 5)
    assert setup.queue.calls == [("add", key("done"), PRIORITY_RESYNC), ("add", key("new"), PRIORITY_CHANGE)]


def test_watch_events_become_keys_only_for_changes_worth_a_run(setups: list[Setup]) -> None:
    setup = Setup([NAMESPACED])
    setups.append(setup)
    setup.kube.lists[ALL] = {"metadata": {"resourceVersion": "10"}, "items": [cr("a", "5"), cr("b", "6")]}
    status_only = cr("a", "11", observed=1)
    new_generation = cr("b", "12", generation=2)
    setup.kube.watches[ALL] = [
        {"type": "MODIFIED", "object": status_only},
        {"type": "MODIFIED", "object": new_generation},
        {"type": "DELETED", "object": cr("a", "13")},
    ]
    setup.kinds.start()
    wait_until(lambda: len(setup.queue.calls) == 4, 5)
    assert setup.queue.calls[2:] == [("add", key("b"), PRIORITY_CHANGE), ("discard", key("a"), None)]


def test_objects_of_another_replica_stay_in_the_cache_only(setups: list[Setup]) -> None:
    setup = Setup([NAMESPACED], owns=lambda uid: uid != "uid-theirs")
    setups.append(setup)
    setup.kube.lists[ALL] = {"metadata": {"resourceVersion": "10"}, "items": [cr("theirs", "5"), cr("mine", "6")]}
    setup.kinds.start()
    wait_until(lambda: setup.kinds.watches_synced()[0], 5)  # a list's events are all handled before it is synced
    assert setup.queue.calls == [("add", key("mine"), PRIORITY_CHANGE)]
    kind = setup.kinds.get(GVK_TEXT)
    assert kind is not None and kind.uid("ns", "theirs") == "uid-theirs"


def test_a_deletion_discards_the_key_whoever_owns_the_object(setups: list[Setup]) -> None:
    setup = Setup([NAMESPACED], owns=lambda uid: False)
    setups.append(setup)
    setup.kube.lists[ALL] = {"metadata": {"resourceVersion": "10"}, "items": [cr("theirs", "5")]}
    setup.kube.watches[ALL] = [{"type": "DELETED", "object": cr("theirs", "11")}]
    setup.kinds.start()
    wait_until(lambda: len(setup.queue.calls) == 1, 5)
    assert setup.queue.calls == [("discard", key("theirs"), None)]


def test_the_kinds_context_reads_the_cache(setups: list[Setup]) -> None:
    setup = Setup([NAMESPACED])
    setups.append(setup)
    setup.kube.lists[ALL] = {"metadata": {"resourceVersion": "10"}, "items": [cr("a", "5")]}
    setup.kinds.start()
    wait_until(lambda: setup.kinds.watches_synced()[0], 5)
    kind = setup.kinds.get(GVK_TEXT)
    assert kind is not None
    found = kind.ctx.lookup("ns", "a")
    assert found is not None and found["metadata"]["uid"] == "uid-a"
    assert kind.ctx.lookup("ns", "missing") is None
    assert kind.uid("ns", "a") == "uid-a"
    assert kind.ctx.watch is setup.watch
    assert [obj["metadata"]["name"] for _, obj in setup.kinds.objects()] == ["a"]
    assert setup.kinds.watches_synced() == (True, "1 watches synced")


def test_one_informer_per_watched_namespace(setups: list[Setup]) -> None:
    setup = Setup([NAMESPACED], namespaces="one,two")
    setups.append(setup)
    one = "/apis/cache.example.com/v1alpha1/namespaces/one/memcacheds"
    two = "/apis/cache.example.com/v1alpha1/namespaces/two/memcacheds"
    setup.kube.lists[one] = {"metadata": {"resourceVersion": "1"}, "items": [cr("a", "5", namespace="one")]}
    setup.kube.lists[two] = {"metadata": {"resourceVersion": "1"}, "items": [cr("a", "6", namespace="two")]}
    setup.kinds.start()
    wait_until(lambda: setup.kinds.watches_synced()[0], 5)
    assert setup.kinds.watches_synced() == (True, "2 watches synced")
    assert sorted(set(setup.kube.listed)) == [one, two]
    assert len(setup.caches.informers) == 2  # the proxy may answer reads from both
    kind = setup.kinds.get(GVK_TEXT)
    assert kind is not None
    assert kind.uid("one", "a") == kind.uid("two", "a") == "uid-a"
    assert kind.ctx.lookup("three", "a") is None


def test_a_cluster_scoped_kind_is_watched_once_whatever_the_namespaces(setups: list[Setup]) -> None:
    setup = Setup([CLUSTER_WIDE], namespaces="one,two")
    setups.append(setup)
    setup.kinds.start()
    wait_until(lambda: setup.kinds.watches_synced()[0], 5)
    assert set(setup.kube.listed) == {ALL}
    assert setup.kinds.watches_synced() == (True, "1 watches synced")


def test_a_kind_not_served_yet_is_waited_for_with_backoff(setups: list[Setup]) -> None:
    missing = ApiError(404, "the API server does not serve it")
    setup = Setup([missing, missing, missing, NAMESPACED])
    setups.append(setup)
    assert setup.kinds.watches_synced() == (
        False,
        f"kinds not served by the API server yet: {GVK_TEXT}",
    )
    setup.kinds.start()
    wait_until(lambda: setup.kinds.watches_synced()[0], 5)
    assert setup.stop.waits[:3] == [1.0, 2.0, 4.0]


def test_a_stop_while_waiting_for_the_kind_gives_up(setups: list[Setup], caplog: pytest.LogCaptureFixture) -> None:
    setup = Setup([ApiError(404, "not served")])
    setups.append(setup)
    with caplog.at_level(logging.INFO, logger="hybrid_operator.reactor.kinds"):
        setup.kinds.start()
        wait_until(lambda: len(setup.stop.waits) >= 2, 5)
        setup.stop.set()
        wait_until(lambda: "not watching" in caplog.text, 5)
    assert setup.kinds.get(GVK_TEXT) is None
    assert setup.kube.listed == []


def failures_in_a_row(setup: Setup) -> int:
    """How many times in a row the readiness check says the kind's watch failed (0: it does not say)."""
    found = re.search(r"failed (\d+) times in a row", setup.kinds.watches_synced()[1])
    return int(found.group(1)) if found else 0


def test_a_watch_failing_for_hours_keeps_retrying(setups: list[Setup]) -> None:
    """2**n of the backoff overflowed a float at the 1,024th failure in a row (eight hours at the 30 s cap)
    and the watch thread died of it: every count of failures in a row has a wait, at most the cap."""
    setup = Setup([NAMESPACED])
    setups.append(setup)
    setup.kinds.start()
    wait_until(lambda: setup.kinds.by_gvk.get(GVK_TEXT) is not None, 5)
    informer = next(iter(setup.kinds.by_gvk[GVK_TEXT].informers.values()))
    waits = [informer._backoff(n) for n in (1, 2, 6, 1023, 1024, 1025, 10**6)]
    assert waits[:3] == [1.0, 2.0, 30.0] and waits[3:] == [30.0] * 4


def test_a_failing_watch_fails_the_readiness_check_naming_it(setups: list[Setup]) -> None:
    setup = Setup([NAMESPACED])
    setups.append(setup)
    setup.kube.lists[ALL] = ApiError(403, "Forbidden")
    setup.kinds.start()
    wait_until(lambda: failures_in_a_row(setup) >= 3, 5)
    ok, detail = setup.kinds.watches_synced()
    assert not ok
    assert f"watch of {GVK_TEXT} in all namespaces failed" in detail
    assert "403" in detail


class HoldingResumer:
    """Holds back the objects named ``held``; records ``{"generation": n}``."""

    def __init__(self, *held: str, enabled: bool = True) -> None:
        self.held, self.is_enabled = set(held), enabled
        self.asked: list[str] = []

    def enabled(self, watch: Watch, resource: Resource) -> bool:
        return self.is_enabled

    def hold(self, watch: Watch, key: Key, obj: KubeObject, period: float) -> bool:
        self.asked.append(key.name)
        return key.name in self.held

    def record(self, watch: Watch, key: Key, obj: KubeObject, succeeded: bool) -> dict[str, Any]:
        return {"generation": obj["metadata"]["generation"]}


def test_a_listed_object_the_resumer_holds_back_is_not_queued(setups: list[Setup]) -> None:
    resumer = HoldingResumer("done")
    setup = Setup([NAMESPACED], resumer=resumer)
    setups.append(setup)
    setup.kube.lists[ALL] = {
        "metadata": {"resourceVersion": "10"},
        "items": [cr("done", "5", generation=2, observed=2), cr("new", "6")],
    }
    setup.kube.watches[ALL] = [{"type": "MODIFIED", "object": cr("done", "11", generation=3)}]
    setup.kinds.start()
    wait_until(lambda: len(setup.queue.calls) == 2, 5)
    assert setup.queue.calls == [("add", key("new"), PRIORITY_CHANGE), ("add", key("done"), PRIORITY_CHANGE)]
    assert resumer.asked == ["done", "new"]  # a change is never held
    kind = setup.kinds.get(GVK_TEXT)
    assert kind is not None and kind.ctx.record is not None
    assert kind.ctx.record(key("done"), cr("done", "11", generation=3), True) == {"generation": 3}


def test_a_kind_the_resumer_turned_off_for_is_queued_as_ever(setups: list[Setup]) -> None:
    resumer = HoldingResumer("done", enabled=False)
    setup = Setup([NAMESPACED], resumer=resumer)
    setups.append(setup)
    setup.kube.lists[ALL] = {
        "metadata": {"resourceVersion": "10"},
        "items": [cr("done", "5", generation=2, observed=2)],
    }
    setup.kinds.start()
    wait_until(lambda: len(setup.queue.calls) == 1, 5)
    assert resumer.asked == [] and setup.queue.calls == [("add", key("done"), PRIORITY_RESYNC)]
    kind = setup.kinds.get(GVK_TEXT)
    assert kind is not None and kind.ctx.record is None
