"""Kubernetes Events on reconciled objects: one Event per (object, type, reason, message), its count
incremented when it repeats, recreated when it expired, and never an error for the reconcile. A fake
Kube holds the Events the way the API server would."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from hybrid_operator.kube import events
from hybrid_operator.kube.client import ApiError, KubeObject
from hybrid_operator.kube.events import COMPONENT, EventRecorder
from hybrid_operator.kube.patching import merge_patch

NS_EVENTS = "/api/v1/namespaces/ns/events"


class EventServer:
    def __init__(self) -> None:
        self.events: dict[str, KubeObject] = {}  # path -> Event
        self.requests: list[tuple[str, str]] = []
        self.failing: ApiError | None = None

    def request(self, method: str, path: str, *, body: Any = None, content_type: str = "application/json") -> Any:
        self.requests.append((method, path))
        if self.failing is not None:
            raise self.failing
        if method == "POST":
            name = f"{path}/{body['metadata']['name']}"
            if name in self.events:
                raise ApiError(409, "AlreadyExists")
            self.events[name] = copy.deepcopy(body)
            return body
        if path not in self.events:
            raise ApiError(404, "Not Found")
        if method == "PATCH":
            assert content_type == "application/merge-patch+json"
            self.events[path] = merge_patch(self.events[path], body)
        return copy.deepcopy(self.events[path])

    def only(self) -> KubeObject:
        [event] = self.events.values()
        return event


def cr(namespace: str | None = "ns", uid: str = "uid-1") -> KubeObject:
    meta = {"name": "mc", "uid": uid, "resourceVersion": "7", **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": meta}


@pytest.fixture(autouse=True)
def fixed_time(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    stamps = [f"2024-01-01T00:00:{i:02d}Z" for i in range(60)]
    monkeypatch.setattr(events, "_now", lambda: stamps.pop(0))
    return stamps


def test_an_event_names_the_object_and_says_who_reported_it() -> None:
    server = EventServer()
    EventRecorder(server).record(cr(), "Warning", "Failed", "quota exceeded")  # type: ignore[arg-type]
    event = server.only()
    assert event["metadata"]["namespace"] == "ns"
    assert event["metadata"]["name"].startswith("mc.")
    assert event["involvedObject"] == {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "name": "mc",
        "namespace": "ns",
        "uid": "uid-1",
        "resourceVersion": "7",
    }
    assert (event["type"], event["reason"], event["message"], event["count"]) == (
        "Warning",
        "Failed",
        "quota exceeded",
        1,
    )
    assert event["source"] == {"component": COMPONENT}
    assert event["reportingComponent"] == COMPONENT
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2024-01-01T00:00:00Z"


def test_a_repeated_event_counts_up_on_one_object() -> None:
    server = EventServer()
    recorder = EventRecorder(server)  # type: ignore[arg-type]
    for _ in range(3):
        recorder.record(cr(), "Warning", "Failed", "quota exceeded")
    event = server.only()
    assert event["count"] == 3
    assert event["firstTimestamp"] == "2024-01-01T00:00:00Z"
    assert event["lastTimestamp"] == "2024-01-01T00:00:02Z"
    assert [m for m, _ in server.requests] == ["POST", "PATCH", "PATCH"]


@pytest.mark.parametrize(
    "other",
    [
        (cr(), "Normal", "Failed", "quota exceeded"),
        (cr(), "Warning", "Other", "quota exceeded"),
        (cr(), "Warning", "Failed", "another message"),
        (cr(uid="uid-2"), "Warning", "Failed", "quota exceeded"),  # a new object of the same name
    ],
)
def test_a_different_event_is_a_different_object(other: tuple[KubeObject, str, str, str]) -> None:
    server = EventServer()
    recorder = EventRecorder(server)  # type: ignore[arg-type]
    recorder.record(cr(), "Warning", "Failed", "quota exceeded")
    recorder.record(*other)
    assert sorted(e["count"] for e in server.events.values()) == [1, 1]


def test_an_expired_event_is_created_again() -> None:
    server = EventServer()
    recorder = EventRecorder(server)  # type: ignore[arg-type]
    recorder.record(cr(), "Warning", "Failed", "quota exceeded")
    server.events.clear()  # the API server's event TTL passed
    recorder.record(cr(), "Warning", "Failed", "quota exceeded")
    assert [m for m, _ in server.requests] == ["POST", "PATCH", "POST"]
    assert server.only()["reason"] == "Failed"


def test_an_event_created_again_after_expiry_counts_from_one() -> None:
    server = EventServer()
    recorder = EventRecorder(server)  # type: ignore[arg-type]
    for _ in range(4):
        recorder.record(cr(), "Warning", "Failed", "quota exceeded")
    server.events.clear()  # expired at count 4
    for _ in range(2):
        recorder.record(cr(), "Warning", "Failed", "quota exceeded")
    assert server.only()["count"] == 2  # the new Event's own count, not 6


def test_the_counts_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "MAX_TRACKED", 3)
    monkeypatch.setattr(events, "_now", lambda: "2024-01-01T00:00:00Z")
    server = EventServer()
    recorder = EventRecorder(server)  # type: ignore[arg-type]
    for i in range(10):
        recorder.record(cr(), "Warning", "Failed", f"message {i}")
    assert len(recorder._counts) == 3
    recorder.record(cr(), "Warning", "Failed", "message 0")  # forgotten here, found on the server: counted on
    assert max(e["count"] for e in server.events.values()) == 2


def test_an_event_another_recorder_created_is_counted_on_not_replaced() -> None:
    server = EventServer()
    EventRecorder(server).record(cr(), "Warning", "Failed", "quota exceeded")  # type: ignore[arg-type]
    # The operator restarted (or another replica): its recorder has no count yet, the server has the Event.
    EventRecorder(server).record(cr(), "Warning", "Failed", "quota exceeded")  # type: ignore[arg-type]
    event = server.only()
    assert event["count"] == 2
    assert event["firstTimestamp"] == "2024-01-01T00:00:00Z"
    assert [m for m, _ in server.requests] == ["POST", "POST", "GET", "PATCH"]


def test_a_cluster_scoped_object_gets_its_events_in_default() -> None:
    server = EventServer()
    EventRecorder(server).record(cr(namespace=None), "Normal", "Created", "ok")  # type: ignore[arg-type]
    [(method, path)] = server.requests
    assert (method, path) == ("POST", "/api/v1/namespaces/default/events")
    assert server.only()["involvedObject"]["namespace"] is None


def test_a_long_message_is_cut_to_what_the_api_server_takes() -> None:
    server = EventServer()
    EventRecorder(server).record(cr(), "Warning", "Failed", "x" * 5000)  # type: ignore[arg-type]
    message = server.only()["message"]
    assert len(message) == 1024
    assert message.endswith("...")


def test_an_event_that_cannot_be_recorded_is_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    server = EventServer()
    server.failing = ApiError(403, "Forbidden")
    with caplog.at_level(logging.WARNING, logger="hybrid_operator.kube.events"):
        EventRecorder(server).record(cr(), "Warning", "Failed", "quota exceeded")  # type: ignore[arg-type]
    assert any("could not record event Failed on ns/mc" in r.getMessage() for r in caplog.records)
    assert server.events == {}
