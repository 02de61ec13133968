"""The zygote's heap as its forks see it: set aside once, after the warm-up, before the first fork.

Where it sits: ``zygote.Zygote.start`` calls ``settle`` once, after the warm-up and Ansible's state reset,
right before it serves runs; every run is a ``fork()`` of what it leaves.

A forked run shares the zygote's memory until it writes to a page; the kernel then copies that page for the
run (copy-on-write). A run writes to many pages of objects it only reads, in two ways:

- the cycle collector links, unlinks and walks every object it tracks: ``gc.freeze()`` moves what the
  warm-up left out of its reach;
- every reference taken or dropped writes the object's reference count, in its header: a run that reads a
  plugin, a module global or a cached template writes the page each lives on. CPython 3.12 and 3.13 leave
  the count of an *immortal* object alone (PEP 683: ``None``, small ints, interned strings and static types
  are immortal from the start), and an object is immortal when the low 32 bits of its count are all set.
  ``settle`` sets them on every object the warm-up left (the collector's objects and everything they refer
  to), so a run reads them without writing their pages.

Measured with ``perf stat -e minor-faults`` over ``bench/executors.py``: a one-task run copies ~3,000 pages
fewer (about half), a Foo run ~3,500; docs/internals/performance.md has the CPU it saves.

What immortal means for those objects: they are never freed, in the zygote or in a run. The zygote keeps them
for its whole life anyway (it serves runs from them), and a run ends with ``os._exit``: what a run drops of
them is not freed before its end rather than freed and copied. Objects made after ``settle`` (every run's
own) are counted and freed as usual.

Where the count is laid out differently (Python 3.11 has no immortal objects; 3.14 and free-threaded builds
count differently; a debug build counts every reference) ``settle`` only freezes, and says why. Before it
marks anything it checks the shape on an object of its own: marked, its count must not move when
references to it come and go. ``HYBRID_OPERATOR_IMMORTAL_HEAP=0`` turns the marking off.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import sysconfig
import time
from dataclasses import dataclass

DISABLE_ENV = "HYBRID_OPERATOR_IMMORTAL_HEAP"
# CPython 3.12/3.13, 64-bit: _Py_IMMORTAL_REFCNT (Include/object.h), the low 32 bits of ob_refcnt all set.
_IMMORTAL_REFCNT = 0xFFFFFFFF
_COUNTED_LIKE_THIS = ((3, 12), (3, 13))


@dataclass(frozen=True)
class Settled:
    """What ``settle`` did: how many objects it marked immortal and how long that took, or why none."""

    immortal: int
    seconds: float
    why_not: str = ""

    def describe(self) -> str:
        if self.why_not:
            return f"the warm-up's objects frozen, not immortal: {self.why_not}"
        return f"{self.immortal} objects of the warm-up immortal in {self.seconds:.2f}s"


def problems(version: tuple[int, ...] | None = None) -> list[str]:
    """Why this interpreter's objects cannot be marked immortal here; empty when they can."""
    found: list[str] = []
    if os.environ.get(DISABLE_ENV) == "0":
        found.append(f"{DISABLE_ENV}=0")
    major_minor = tuple((version or sys.version_info)[:2])
    if sys.implementation.name != "cpython":
        found.append(f"{sys.implementation.name} is not CPython")
    elif major_minor not in _COUNTED_LIKE_THIS:
        found.append(f"Python {major_minor[0]}.{major_minor[1]} counts references differently (3.12 and 3.13 do)")
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        found.append("a free-threaded build counts references per thread")
    if hasattr(sys, "gettotalrefcount"):
        found.append("a debug build counts every reference")
    if sys.maxsize < 2**32:
        found.append("a 32-bit build marks immortal objects otherwise")
    return found


def _mark(address: int) -> None:
    ctypes.c_ssize_t.from_address(address).value = _IMMORTAL_REFCNT


def _shape_problem() -> str:
    """Mark an object of our own and check that references to it no longer move its count."""
    probe = ["probe"]
    _mark(id(probe))
    before = sys.getrefcount(probe)
    held = [probe for _ in range(8)]
    during = sys.getrefcount(probe)
    del held
    if not before == during == sys.getrefcount(probe):
        return f"a marked object's reference count still moves ({before}, {during})"
    return ""


def _everything_reachable() -> list[object]:
    """The collector's objects and everything they refer to (strings, numbers, code, ... are not tracked by
    the collector but hang off objects that are), each once. The walk's own containers are made after the
    collector's list, so they are not part of it."""
    todo = gc.get_objects()
    found: dict[int, object] = {}  # id -> object
    while todo:
        batch, todo = todo, []
        for obj in batch:
            if id(obj) not in found:
                found[id(obj)] = obj
                todo.extend(gc.get_referents(obj))
    return list(found.values())


def settle() -> Settled:
    """Collect, mark what is left immortal (where the interpreter counts references as expected), freeze it."""
    started = time.monotonic()
    gc.collect()
    why = problems()
    if not why and (shape := _shape_problem()):
        why = [shape]
    count = 0
    if not why:
        objects = _everything_reachable()
        for obj in objects:
            _mark(id(obj))
        count = len(objects)
        del objects
    gc.freeze()
    return Settled(count, time.monotonic() - started, "; ".join(why))
