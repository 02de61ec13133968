"""skipConvergedAtStart: the record a run leaves, what pins a role's content, and the start-up check that
skips a converged object or runs it when a child drifted (fake children's caches, a real work queue)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybrid_operator.kube.client import KubeObject, Resource
from hybrid_operator.kube.objects import GVK
from hybrid_operator.reactor import resuming
from hybrid_operator.reactor.annotations import RECONCILE_PERIOD
from hybrid_operator.reactor.queueing import Key, WorkQueue
from hybrid_operator.reactor.resuming import RECORD, Record, Resumer, content_digest, parse_record
from hybrid_operator.settings.watches import Target, Watch

FOO = GVK("samplecontroller.k8s.io", "v1alpha1", "Foo")
KEY = Key(str(FOO), "ns", "a")
DIGEST, OTHER = "0" * 32, "f" * 32
DEPLOYMENTS = "Deployment.v1.apps"
WITH_STATUS = Resource(FOO, "foos", True, status_subresource=True)


def role_tree(tmp_path: Path) -> Path:
    role = tmp_path / "roles" / "foo"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text("- ansible.builtin.debug: {msg: hi}\n")
    (tmp_path / "roles" / "helper" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "helper" / "tasks" / "main.yml").write_text("[]\n")
    return role


def watch_of(role: Path, **options: Any) -> Watch:
    return Watch(gvk=FOO, target=Target(role=str(role)), skip_converged_at_start=True, **options)


def record(generation: int = 3, content: str = DIGEST, children: str = DIGEST, kinds: list[str] | None = None) -> Any:
    return {"generation": generation, "content": content, "children": children, "kinds": kinds or [DEPLOYMENTS]}


# -- the record ---------------------------------------------------------------------------------------------


def test_a_record_reads_back_as_written() -> None:
    written = Record(3, DIGEST, OTHER, (DEPLOYMENTS, "ConfigMap.v1")).as_status()
    assert parse_record({RECORD: written}) == Record(3, DIGEST, OTHER, (DEPLOYMENTS, "ConfigMap.v1"))


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "junk",
        {**record(), "extra": 1},
        {k: v for k, v in record().items() if k != "kinds"},
        record(generation=True),  # type: ignore[arg-type]
        record(generation=0),
        record(generation=2**63),
        {**record(), "generation": "3"},
        record(content="0" * 31),
        record(content="G" * 32),
        record(children="0" * 33),
        {**record(), "kinds": "Deployment.v1.apps"},
        record(kinds=["x"] * 65),
        record(kinds=[""]),
        record(kinds=["Deployment"]),
        record(kinds=["Deploy/ment.v1.apps"]),
        record(kinds=["D" * 400 + ".v1"]),
        record(kinds=[{"kind": "Deployment"}]),  # type: ignore[list-item]
    ],
)
def test_anything_but_exactly_what_we_write_is_no_record(raw: Any) -> None:
    assert parse_record({RECORD: raw}) is None


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(), lambda x: st.lists(x) | st.dictionaries(st.text(), x)
    )
)
def test_a_status_of_anything_never_raises(status: Any) -> None:
    parse_record(status)
    parse_record({RECORD: status})


# -- what pins a role's content -------------------------------------------------------------------------------


def test_the_content_moves_with_the_role_its_siblings_and_the_watch(tmp_path: Path) -> None:
    role = role_tree(tmp_path)
    first = content_digest(watch_of(role), ())
    assert first is not None and first == content_digest(watch_of(role), ())
    (role / "tasks" / "main.yml").write_text("- ansible.builtin.debug: {msg: changed}\n")
    second = content_digest(watch_of(role), ())
    (tmp_path / "roles" / "helper" / "tasks" / "main.yml").write_text("- ansible.builtin.meta: noop\n")
    third = content_digest(watch_of(role), ())
    fourth = content_digest(watch_of(role, vars={"x": 1}), ())
    assert len({first, second, third, fourth}) == 4


def test_a_roles_path_counts_and_byte_code_does_not(tmp_path: Path) -> None:
    role, extra = role_tree(tmp_path), tmp_path / "extra"
    (extra / "common").mkdir(parents=True)
    before = content_digest(watch_of(role), (extra,))
    (extra / "common" / "x.yml").write_text("a: 1\n")
    after = content_digest(watch_of(role), (extra,))
    (tmp_path / "roles" / "foo" / "__pycache__").mkdir()
    (tmp_path / "roles" / "foo" / "__pycache__" / "m.pyc").write_bytes(b"\0")
    assert before != after == content_digest(watch_of(role), (extra,))


def test_what_cannot_be_pinned_never_skips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert content_digest(Watch(gvk=FOO, target=Target(role="example.cache.memcached")), ()) is None
    role = role_tree(tmp_path)
    monkeypatch.setattr(resuming, "MAX_FILES", 1)
    assert content_digest(watch_of(role), ()) is None


# -- the start-up check ---------------------------------------------------------------------------------------


class FakeDependents:
    """The children's caches: synced or not, and the digest they give now."""

    def __init__(self) -> None:
        self.is_synced = True
        self.digest = DIGEST
        self.ensured: list[tuple[GVK, GVK]] = []
        self.kinds = [DEPLOYMENTS]

    def ensure(self, owner_kind: GVK, gvk: GVK) -> None:
        self.ensured.append((owner_kind, gvk))

    def kinds_of(self, owner_kind: GVK) -> list[str]:
        return self.kinds

    def synced(self, kinds: list[str]) -> bool:
        return self.is_synced

    def children_digest(self, owner: Key, kinds: list[str]) -> str:
        return self.digest


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.watch = watch_of(role_tree(tmp_path))
        self.dependents = FakeDependents()
        self.queue = WorkQueue(global_limit=10, per_kind_limits={str(FOO): 10})
        self.now = 100.0
        self.objects: dict[Key, KubeObject] = {}
        self.resumer = Resumer(
            [self.watch],
            (),
            self.dependents,  # type: ignore[arg-type]
            self.queue,
            self.objects.get,
            check_within=30,
            clock=lambda: self.now,
        )
        self.content = self.resumer._content[str(FOO)]

    def converged(self, generation: int = 3, **status: Any) -> KubeObject:
        meta = {"name": "a", "namespace": "ns", "uid": "u", "generation": generation}
        conditions = [{"type": "Successful", "status": "True"}, {"type": "Failure", "status": "False"}]
        body = {"observedGeneration": generation, "conditions": conditions, RECORD: record(content=self.content)}
        obj: KubeObject = {"metadata": meta, "status": {**body, **status}}
        self.objects[KEY] = obj
        return obj

    def check(self) -> None:
        """One pass of the checker over what is held."""
        for key, entry in list(self.resumer._held.items()):
            if self.resumer._decide(key, entry):
                self.resumer._held.pop(key)

    def queued(self) -> list[tuple[Key, bool]]:
        """(key, due now) of everything in the queue."""
        ready = [(k, True) for lane in self.queue._ready for k in lane]
        return ready + [(k, False) for k in self.queue._delayed]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_a_converged_object_whose_children_are_as_left_is_skipped(setup: Setup) -> None:
    assert setup.resumer.hold(setup.watch, KEY, setup.converged(), 0.0)
    assert setup.dependents.ensured == [(FOO, GVK("apps", "v1", "Deployment"))]
    setup.check()
    assert setup.queued() == [] and setup.resumer.held() == 0


def test_a_skipped_object_keeps_its_periodic_resync(setup: Setup) -> None:
    obj = setup.converged()
    obj["metadata"]["annotations"] = {RECONCILE_PERIOD: "1h"}
    assert setup.resumer.hold(setup.watch, KEY, obj, 0.0)
    setup.check()
    assert setup.queued() == [(KEY, False)]
    assert 0 < setup.queue._delayed[KEY] - setup.queue._clock() <= 3600


def test_a_child_changed_meanwhile_runs_the_object_as_a_change(setup: Setup) -> None:
    assert setup.resumer.hold(setup.watch, KEY, setup.converged(), 0.0)
    setup.dependents.digest = OTHER
    setup.check()
    assert setup.queued() == [(KEY, True)]


def test_children_that_cannot_be_checked_in_time_run_the_object(setup: Setup) -> None:
    assert setup.resumer.hold(setup.watch, KEY, setup.converged(), 0.0)
    setup.dependents.is_synced = False
    setup.check()
    assert setup.resumer.held() == 1 and setup.queued() == []
    setup.now += 31
    setup.check()
    assert setup.resumer.held() == 0 and setup.queued() == [(KEY, True)]


@pytest.mark.parametrize(
    "change",
    [
        "generation",
        "observed",
        "content",
        "failed",
        "deleting",
        "no-record",
        "bad-annotation",
        "forged-by-annotation",
    ],
)
def test_what_is_not_provably_converged_goes_to_the_queue(setup: Setup, change: str) -> None:
    obj = setup.converged()
    if change == "generation":
        obj["metadata"]["generation"] = 4  # the spec changed while the operator was down
        obj["status"]["observedGeneration"] = 4
    elif change == "observed":
        obj["status"]["observedGeneration"] = 2
    elif change == "content":
        obj["status"][RECORD]["content"] = OTHER  # another role or operator version reconciled it
    elif change == "failed":
        obj["status"]["conditions"][1]["status"] = "True"
    elif change == "deleting":
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    elif change == "no-record":
        del obj["status"][RECORD]
    elif change == "bad-annotation":
        obj["metadata"]["annotations"] = {RECONCILE_PERIOD: "1ms"}
    else:  # a tenant who may update the object but not its status writes the record as an annotation
        del obj["status"][RECORD]
        obj["metadata"]["annotations"] = {RECORD: str(record(content=setup.content))}
    assert not setup.resumer.hold(setup.watch, KEY, obj, 0.0)


def test_an_object_changed_while_held_is_left_to_its_own_event(setup: Setup) -> None:
    assert setup.resumer.hold(setup.watch, KEY, setup.converged(), 0.0)
    setup.converged(generation=4)  # the spec changed: its MODIFIED event queued it already
    setup.check()
    assert setup.resumer.held() == 0 and setup.queued() == []


def test_the_checker_thread_decides_and_stops(setup: Setup) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=setup.resumer.run, args=(stop,), daemon=True)
    thread.start()
    assert setup.resumer.hold(setup.watch, KEY, setup.converged(), 0.0)
    for _ in range(200):
        if not setup.resumer.held():
            break
        threading.Event().wait(0.01)
    stop.set()
    thread.join(5)
    assert setup.resumer.held() == 0 and not thread.is_alive()


# -- the record a run leaves ----------------------------------------------------------------------------------


def test_a_success_records_what_it_stood_on(setup: Setup) -> None:
    obj = setup.converged(generation=5)
    assert setup.resumer.record(setup.watch, KEY, obj, True) == record(5, setup.content, DIGEST, [DEPLOYMENTS])


def test_no_record_after_a_failure_or_before_the_children_are_known(setup: Setup) -> None:
    obj = setup.converged()
    assert setup.resumer.record(setup.watch, KEY, obj, False) is None
    setup.dependents.is_synced = False
    assert setup.resumer.record(setup.watch, KEY, obj, True) is None


def test_only_a_kind_whose_status_only_the_operator_writes_skips(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    assert setup.resumer.enabled(setup.watch, WITH_STATUS)
    without = Resource(FOO, "foos", True)
    assert not setup.resumer.enabled(setup.watch, without)
    assert not setup.resumer.enabled(setup.watch, without)
    assert sum("no status subresource" in r.getMessage() for r in caplog.records) == 1
