"""What an informer keeps of each object, and in what form: compact JSON, decoded only when looked up.

Used by ``watching.Informer`` for its store. Two savings, each measured (README, Performance):

- ``metadata.managedFields`` is dropped as soon as an object is decoded, before anything stores or hands
  it on: nothing in the operator reads it (controller-runtime strips it from its caches too), and for a
  small custom resource it is a third of the object;
- an object is kept as its compact JSON text (bytes), not as the decoded dict. A decoded dict costs about
  four times its JSON in Python objects; the bytes cost what they are, and a lookup decodes them in a few
  microseconds (a 1 KB object: ~7 us), which is nothing next to the run a lookup is for. zlib would halve the
  bytes again at 2.5x the decode time; not worth it. The run proxy answers its cache reads with the bytes
  as they are, with no encode at all.

Every lookup returns a fresh decode, so no caller can change what the store holds. An object the encoder
cannot write (nested deeper than its recursion limit, which the API server allows) is kept as the dict;
a compact store is an optimisation and never refuses an object.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hybrid_operator.kube import jsondecoding

KubeObject = dict[str, Any]
StoreKey = tuple[str, str]  # (namespace, name)

# ASCII output: a lone surrogate the decoder accepted ("\ud800") must survive the trip to bytes.
_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)


def strip(obj: KubeObject) -> KubeObject:
    """Drop ``metadata.managedFields`` from a freshly decoded object (in place: the dict is the decoder's)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def encode(obj: KubeObject) -> bytes | KubeObject:
    """The object's compact JSON, or the object itself when it is too deep to encode."""
    try:
        return _ENCODER.encode(obj).encode("ascii")
    except RecursionError:
        return obj


def decode(stored: bytes | KubeObject) -> KubeObject:
    if isinstance(stored, bytes):
        obj: KubeObject = jsondecoding.loads(stored)
        return obj
    return stored


def as_json(stored: bytes | KubeObject) -> bytes | None:
    """The stored object as JSON bytes (what the API server would answer for it); None for one too deep
    to encode (the API server's to answer)."""
    if isinstance(stored, bytes):
        return stored
    try:
        return json.dumps(stored).encode()
    except RecursionError:
        return None


class Store:
    """``(namespace, name)`` -> an encoded object. Not thread-safe: its informer's lock guards it."""

    def __init__(self) -> None:
        self._items: dict[StoreKey, bytes | KubeObject] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: StoreKey) -> bool:
        return key in self._items

    def put(self, key: StoreKey, obj: KubeObject) -> None:
        self._items[key] = encode(obj)

    def set(self, key: StoreKey, stored: bytes | KubeObject) -> None:
        """Store what ``encode`` returned (encoded outside the lock)."""
        self._items[key] = stored

    def pop(self, key: StoreKey) -> bytes | KubeObject | None:
        return self._items.pop(key, None)

    def raw(self, key: StoreKey) -> bytes | KubeObject | None:
        """What is stored for ``key``, undecoded (decode it with ``decode``, outside the lock)."""
        return self._items.get(key)

    def items(self) -> list[tuple[StoreKey, bytes | KubeObject]]:
        return list(self._items.items())

    def keys(self) -> Iterator[StoreKey]:
        return iter(list(self._items))
