"""The informer against a scripted API server: list, watch, resume, re-list on 410 Gone, bookmarks, backoff.

The fake Kube answers each list and each watch with the next step of a script and records what it was
asked; when the script runs out it stops the informer. ``stop.wait`` returns at once and records the
backoff asked for, so no test sleeps.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from hybrid_operator.kube import watching
from hybrid_operator.kube.client import ApiError, KubeObject, Resource, TooLarge
from hybrid_operator.kube.objects import GVK, bounded, oversize_of
from hybrid_operator.kube.watching import Informer

RESOURCE = Resource(GVK("cache.example.com", "v1alpha1", "Memcached"), "memcacheds", True)
PATH = "/apis/cache.example.com/v1alpha1/memcacheds"


def cr(name: str, rv: str, namespace: str = "ns", **spec: Any) -> KubeObject:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}, "spec": spec}


def page(rv: str, *items: KubeObject, more: str = "") -> dict[str, Any]:
    meta = {"resourceVersion": rv, **({"continue": more} if more else {})}
    return {"kind": "MemcachedList", "metadata": meta, "items": [dict(i) for i in items]}


def event(event_type: str, obj: KubeObject) -> dict[str, Any]:
    return {"type": event_type, "object": obj}


def bookmark(rv: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"kind": "Memcached", "metadata": {"resourceVersion": rv}}}


class Stop(threading.Event):
    """A stop flag whose waits return at once, recording the delay asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return self.is_set()


class ScriptedKube:
    """``lists``: pages (or errors) answered in order; ``watches``: each a list of events, possibly ending with
    an exception the stream raises. The informer is stopped when it asks for more than the script holds."""

    def __init__(self, stop: Stop, lists: list[Any], watches: list[list[Any]]) -> None:
        self.stop, self.lists, self.watches = stop, list(lists), list(watches)
        self.list_queries: list[dict[str, Any]] = []
        self.watch_queries: list[dict[str, Any]] = []

    def request(
        self, method: str, path: str, *, query: dict[str, Any], timeout: float, max_bytes: int | None = None
    ) -> KubeObject:
        """The next page; with ``max_bytes``, ``TooLarge`` for a page whose JSON is longer, trimmed to the
        ``limit`` asked for (the page is then still there for the next, smaller request)."""
        assert (method, path) == ("GET", PATH)
        self.list_queries.append(dict(query))
        if not self.lists:
            self.stop.set()
            raise ApiError(0, "script ended")
        answer = self.lists[0]
        if isinstance(answer, dict) and len(answer["items"]) > query["limit"]:
            rest = {**answer, "items": answer["items"][query["limit"] :]}
            answer = {**answer, "items": answer["items"][: query["limit"]]}
            answer["metadata"] = {**answer["metadata"], "continue": "more"}
            size = len(json.dumps(answer))
            if max_bytes is not None and size > max_bytes:
                raise TooLarge(size, max_bytes)
            self.lists[0] = rest
            return answer
        if isinstance(answer, dict) and max_bytes is not None and len(json.dumps(answer)) > max_bytes:
            raise TooLarge(len(json.dumps(answer)), max_bytes)
        self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    def stream(self, path: str, query: dict[str, Any], timeout: float) -> Any:
        assert path == PATH
        self.watch_queries.append(dict(query))
        if not self.watches:
            self.stop.set()
            return
        for item in self.watches.pop(0):
            if isinstance(item, Exception):
                raise item
            yield item


class Run:
    def __init__(self, lists: list[Any], watches: list[list[Any]], **options: Any) -> None:
        self.stop = Stop()
        self.kube = ScriptedKube(self.stop, lists, watches)
        self.events: list[tuple[str, KubeObject | None, KubeObject]] = []
        self.informer = Informer(self.kube, RESOURCE, self.record, **options)  # type: ignore[arg-type]

    def record(self, event_type: str, old: KubeObject | None, new: KubeObject) -> None:
        self.events.append((event_type, old, new))

    def run(self) -> Run:
        self.informer.run(self.stop)
        return self

    def seen(self) -> list[tuple[str, str, str]]:
        """(type, name, resourceVersion) of each event handed on."""
        return [(t, new["metadata"]["name"], new["metadata"]["resourceVersion"]) for t, _, new in self.events]

    def names(self) -> list[str]:
        return sorted(o["metadata"]["name"] for o in self.informer.objects())


@pytest.fixture(autouse=True)
def no_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watching.random, "uniform", lambda a, b: 1.0)


# -- list, then watch ----------------------------------------------------------------------------------


def test_it_lists_then_watches_from_the_lists_resource_version() -> None:
    run = Run([page("10", cr("a", "5"), cr("b", "7"))], [[]], label_selector="app=x").run()
    assert run.informer.synced.is_set()
    assert run.seen() == [("ADDED", "a", "5"), ("ADDED", "b", "7")]
    assert run.kube.list_queries[0]["labelSelector"] == "app=x"
    first_watch = run.kube.watch_queries[0]
    assert first_watch["resourceVersion"] == "10"
    assert first_watch["allowWatchBookmarks"] == "true"
    assert first_watch["labelSelector"] == "app=x"
    assert watching.WATCH_SECONDS - 10 <= first_watch["timeoutSeconds"] <= watching.WATCH_SECONDS


def test_listed_objects_get_their_kind_and_api_version() -> None:
    run = Run([page("10", cr("a", "5"))], []).run()
    obj = run.informer.get("ns", "a")
    assert obj is not None
    assert (obj["apiVersion"], obj["kind"]) == ("cache.example.com/v1alpha1", "Memcached")


def test_a_paginated_list_follows_the_continue_token() -> None:
    lists = [page("10", cr("a", "5"), more="tok"), page("10", cr("b", "6"))]
    run = Run(lists, [[]], page_size=1).run()
    assert [q["continue"] for q in run.kube.list_queries[:2]] == ["", "tok"]
    assert all(q["limit"] == 1 for q in run.kube.list_queries)
    assert run.names() == ["a", "b"]
    assert run.kube.watch_queries[0]["resourceVersion"] == "10"


def test_watch_events_keep_the_store_and_are_handed_on_with_the_old_object() -> None:
    watch = [
        event("ADDED", cr("b", "11")),
        event("MODIFIED", cr("a", "12", size=2)),
        event("DELETED", cr("b", "13")),
    ]
    run = Run([page("10", cr("a", "5", size=1))], [watch]).run()
    assert run.seen()[1:] == [("ADDED", "b", "11"), ("MODIFIED", "a", "12"), ("DELETED", "b", "13")]
    _, old, new = run.events[2]
    assert old is not None and old["spec"] == {"size": 1}  # the object as it was, not changed in place
    assert new["spec"] == {"size": 2}
    assert run.names() == ["a"]
    assert run.informer.snapshot()[1] == "13"


def test_managed_fields_are_neither_stored_nor_handed_on() -> None:
    managed = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    listed, watched = cr("a", "5"), cr("b", "11")
    listed["metadata"]["managedFields"] = watched["metadata"]["managedFields"] = managed
    run = Run([page("10", listed)], [[event("ADDED", watched)]]).run()
    assert all("managedFields" not in new["metadata"] for _t, _old, new in run.events)
    assert all("managedFields" not in o["metadata"] for o in run.informer.objects())
    assert b"managedFields" not in (run.informer.raw("ns", "a") or b"")


def test_with_keep_only_the_projection_is_stored_and_handed_on() -> None:
    def names_only(obj: KubeObject) -> KubeObject:
        return {"metadata": {k: obj["metadata"][k] for k in ("name", "namespace", "resourceVersion")}}

    watch = [[event("MODIFIED", cr("a", "6", size=2))]]
    run = Run([page("10", cr("a", "5", size=1))], watch, keep=names_only, full=False).run()
    assert not run.informer.full
    assert [new for _t, _old, new in run.events] == [names_only(cr("a", "5")), names_only(cr("a", "6"))]
    assert run.events[1][1] == names_only(cr("a", "5"))
    assert run.informer.get("ns", "a") == names_only(cr("a", "6"))


def test_lookups_are_copies_the_store_does_not_share() -> None:
    run = Run([page("10", cr("a", "5", size=1))], []).run()
    first = run.informer.get("ns", "a")
    assert first is not None
    first["spec"]["size"] = 99
    assert (run.informer.get("ns", "a") or {})["spec"] == {"size": 1}
    assert run.informer.objects()[0]["spec"] == {"size": 1}


def test_a_cluster_wide_informer_keys_objects_by_namespace() -> None:
    run = Run([page("10", cr("a", "5", namespace="one"), cr("a", "6", namespace="two"))], []).run()
    one, two = run.informer.get("one", "a"), run.informer.get("two", "a")
    assert one is not None and two is not None
    assert (one["metadata"]["resourceVersion"], two["metadata"]["resourceVersion"]) == ("5", "6")
    assert run.informer.get("three", "a") is None


# -- resuming and re-listing ---------------------------------------------------------------------------


def test_a_watch_that_ends_is_resumed_from_the_last_version_seen_without_a_list() -> None:
    run = Run([page("10")], [[event("ADDED", cr("a", "11"))], []]).run()
    assert [q["resourceVersion"] for q in run.kube.watch_queries] == ["10", "11", "11"]
    assert len(run.kube.list_queries) == 1
    assert run.stop.waits == []  # a stream the server ended is no failure


def test_a_broken_stream_is_resumed_from_the_last_version_after_a_backoff() -> None:
    broken = [event("ADDED", cr("a", "11")), ApiError(0, "watch stream interrupted")]
    run = Run([page("10")], [broken, []]).run()
    assert [q["resourceVersion"] for q in run.kube.watch_queries][:2] == ["10", "11"]
    assert len(run.kube.list_queries) == 1
    assert run.stop.waits == [1.0]  # 0.5 * 2**1, no jitter here
    assert run.seen() == [("ADDED", "a", "11")]  # not handed on again


@pytest.mark.parametrize(
    "gone",
    [ApiError(410, "Gone"), event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired"})],
    ids=["raised", "error-event"],
)
def test_gone_lists_again_and_reports_the_differences(gone: Any) -> None:
    lists = [
        page("10", cr("a", "5"), cr("b", "6")),
        page("20", cr("a", "15"), cr("c", "16")),  # b deleted and c created while we were away
    ]
    run = Run(lists, [[event("MODIFIED", cr("a", "11")), gone], []]).run()
    assert run.seen()[3:] == [("DELETED", "b", "6"), ("MODIFIED", "a", "15"), ("ADDED", "c", "16")]
    assert run.names() == ["a", "c"]
    assert [q["resourceVersion"] for q in run.kube.watch_queries][:2] == ["10", "20"]
    assert run.stop.waits == []  # Gone is no failure: no backoff


def test_gone_again_right_after_a_list_backs_off_instead_of_listing_in_a_tight_loop() -> None:
    gone = ApiError(410, "Gone")
    lists = [page("10"), page("11"), page("12"), page("13"), page("14"), page("16")]
    run = Run(lists, [[gone], [gone], [gone], [gone], [bookmark("15")], [gone], []], backoff_cap=5.0).run()
    # the first expiry lists at once; each further one without an event in between waits longer
    assert run.stop.waits == [2.0, 4.0, 5.0]
    assert len(run.kube.list_queries) == 6  # the initial list, four re-lists, and one after the bookmark
    # a watch that delivered something (here a bookmark) starts the count over: its expiry lists at once


def test_an_error_event_other_than_gone_is_a_failure_resumed_from_the_last_version() -> None:
    error = event("ERROR", {"kind": "Status", "code": 500, "reason": "InternalError", "message": "etcd"})
    run = Run([page("10")], [[event("ADDED", cr("a", "11")), error], []]).run()
    assert len(run.kube.list_queries) == 1
    assert [q["resourceVersion"] for q in run.kube.watch_queries][:2] == ["10", "11"]
    assert run.stop.waits == [1.0]


def test_bookmarks_move_the_resource_version_without_an_event() -> None:
    run = Run([page("10", cr("a", "5"))], [[bookmark("30")], []]).run()
    assert [q["resourceVersion"] for q in run.kube.watch_queries][:2] == ["10", "30"]
    assert run.seen() == [("ADDED", "a", "5")]
    assert run.names() == ["a"]


def test_a_list_that_fails_is_retried_and_only_then_synced() -> None:
    run = Run([ApiError(503, "Unavailable"), page("10", cr("a", "5"))], [[]])
    run.run()
    assert run.stop.waits[0] == 1.0
    assert run.informer.synced.is_set()
    assert run.names() == ["a"]


def test_the_backoff_doubles_per_failure_up_to_the_cap() -> None:
    failing = [[ApiError(0, "unreachable")] for _ in range(6)]
    run = Run([page("10")], [*failing, []], backoff_cap=5.0).run()
    assert run.stop.waits[:6] == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_the_backoff_starts_over_after_a_watch_that_worked() -> None:
    run = Run([page("10")], [[ApiError(0, "x")], [ApiError(0, "x")], [], [ApiError(0, "x")], []]).run()
    assert run.stop.waits == [1.0, 2.0, 1.0]


def test_an_unexpected_error_lists_again() -> None:
    garbage = event("ERROR", {"kind": "Status", "code": "not a number"})  # int() raises ValueError
    run = Run([page("10", cr("a", "5")), page("20", cr("a", "5"))], [[garbage], []]).run()
    assert len(run.kube.list_queries) == 2
    assert run.kube.watch_queries[1]["resourceVersion"] == "20"
    assert run.stop.waits == [1.0]


def test_a_handler_that_fails_on_one_object_does_not_stop_the_others() -> None:
    stop = Stop()
    kube = ScriptedKube(stop, [page("10")], [[event("ADDED", cr("bad", "11")), event("ADDED", cr("good", "12"))]])
    handled: list[str] = []

    def handler(event_type: str, old: KubeObject | None, new: KubeObject) -> None:
        if new["metadata"]["name"] == "bad":
            raise RuntimeError("handler bug")
        handled.append(new["metadata"]["name"])

    informer = Informer(kube, RESOURCE, handler)  # type: ignore[arg-type]
    informer.run(stop)
    assert handled == ["good"]
    assert sorted(o["metadata"]["name"] for o in informer.objects()) == ["bad", "good"]
    assert stop.waits == []  # no failure of the watch


def test_a_stop_during_a_stream_ends_the_informer_without_applying_more() -> None:
    stop = Stop()
    kube = ScriptedKube(stop, [page("10")], [[event("ADDED", cr("a", "11")), event("ADDED", cr("b", "12"))]])
    informer = Informer(kube, RESOURCE, lambda t, old, new: stop.set())  # type: ignore[arg-type]
    informer.run(stop)
    assert [o["metadata"]["name"] for o in informer.objects()] == ["a"]
    assert len(kube.watch_queries) == 1


# -- health --------------------------------------------------------------------------------------------


def test_health_fails_after_three_failures_in_a_row_naming_the_error() -> None:
    run = Run([page("10")], [[ApiError(503, "Unavailable")] for _ in range(3)])
    run.kube.watches.append([])  # then a watch that works, ending the script
    seen: list[tuple[bool, str]] = []
    real_wait = run.stop.wait

    def wait(timeout: float | None = None) -> bool:
        seen.append(run.informer.health())
        return real_wait(timeout)

    run.stop.wait = wait  # type: ignore[method-assign]
    run.run()
    assert [ok for ok, _ in seen] == [True, True, False]
    assert "failed 3 times in a row" in seen[2][1]
    assert "503" in seen[2][1]
    assert "Memcached.v1alpha1.cache.example.com in all namespaces" in seen[2][1]
    assert run.informer.health() == (True, "ok")  # the watch that worked reset the count


def test_health_fails_when_nothing_got_through_for_too_long(monkeypatch: pytest.MonkeyPatch) -> None:
    informer = Informer(ScriptedKube(Stop(), [], []), RESOURCE, lambda *a: None, namespace="ns")  # type: ignore[arg-type]
    assert informer.health()[0]
    monkeypatch.setattr(watching, "STALE_AFTER", -1)
    ok, detail = informer.health()
    assert not ok
    assert "in ns has made no progress" in detail


# -- what is kept --------------------------------------------------------------------------------------


def test_an_object_over_the_entry_bound_is_kept_as_a_stub_listed_or_watched() -> None:
    big = cr("big", "5", items=[{"a": 1}] * 300)
    watched = cr("later", "11", items=list(range(300)))
    run = Run([page("10", cr("small", "6", size=1), big)], [[event("ADDED", watched)]], keep=lambda o: bounded(o, 100))
    run.run()
    kept = {o["metadata"]["name"]: o for o in run.informer.objects()}
    assert kept["small"]["spec"] == {"size": 1}
    for name, entries in (("big", 608), ("later", 306)):  # the items, apiVersion and kind, metadata
        assert "spec" not in kept[name]
        size = oversize_of(kept[name])
        assert size is not None and (size.entries, size.limit) == (entries, 100), name
        assert kept[name]["metadata"]["name"] == name
    assert next(new for _, _, new in run.events if new["metadata"]["name"] == "big") == kept["big"]


def test_a_page_too_large_to_decode_is_asked_for_again_in_smaller_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watching, "MAX_PAGE_BYTES", 2_000)
    objects = [cr(f"o{i}", str(i), blob="x" * 300) for i in range(12)]  # ~0.4 KB each: 4 fit in a page
    run = Run([page("50", *objects)], [[]], page_size=500).run()
    assert run.names() == sorted(f"o{i}" for i in range(12))
    limits = [q["limit"] for q in run.kube.list_queries]
    assert limits[:3] == [500, 125, 31] and all(limit <= 500 for limit in limits)
    assert min(limits) >= 1
