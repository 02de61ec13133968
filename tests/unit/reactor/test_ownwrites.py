"""``ownwrites.OwnWrites``: our own last write of an object stands in for the watch's copy until the watch
delivers it, and only until then."""

from __future__ import annotations

import pytest

from hybrid_operator.kube.client import KubeObject
from hybrid_operator.reactor import ownwrites
from hybrid_operator.reactor.ownwrites import OwnWrites, resource_version
from hybrid_operator.reactor.queueing import Key

KEY = Key("Demo.v1.test", "ns", "one")


def obj(version: str, **status: object) -> KubeObject:
    meta = {"name": "one", "namespace": "ns", "resourceVersion": version, "managedFields": [{"manager": "x"}]}
    return {"metadata": meta, "status": dict(status)}


def test_our_newer_write_stands_in_for_a_cache_that_is_behind() -> None:
    own = OwnWrites()
    own.remember(KEY, obj("12", phase="written"))
    newest = own.newest(KEY, obj("11", phase="old"))
    assert newest is not None and newest["status"] == {"phase": "written"}
    assert "managedFields" not in newest["metadata"]  # kept without them
    assert own.keys() == [KEY]


def test_a_cache_that_caught_up_wins_and_our_copy_is_forgotten() -> None:
    own = OwnWrites()
    own.remember(KEY, obj("12", phase="written"))
    newest = own.newest(KEY, obj("13", phase="someone else's"))
    assert newest is not None and newest["status"] == {"phase": "someone else's"}
    assert own.keys() == []


def test_an_object_the_watch_saw_deleted_is_gone_and_forgotten() -> None:
    own = OwnWrites()
    own.remember(KEY, obj("12"))
    assert own.newest(KEY, None) is None
    assert own.keys() == []


def test_writes_older_than_the_ttl_are_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(ownwrites.time, "monotonic", lambda: now[0])
    own = OwnWrites()
    own.remember(KEY, obj("12"))
    now[0] += ownwrites.TTL / 2
    own.tidy()
    assert own.keys() == [KEY]
    now[0] += ownwrites.TTL
    own.tidy()
    assert own.keys() == []
    assert own.newest(KEY, obj("11")) == obj("11")


@pytest.mark.parametrize(("version", "number"), [("42", 42), ("", 0), ("abc", 0), ("-3", 0), ("١٢", 0)])
def test_resource_versions_compare_as_numbers_and_anything_else_as_zero(version: str, number: int) -> None:
    assert resource_version(obj(version)) == number
