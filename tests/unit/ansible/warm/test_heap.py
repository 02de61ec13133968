"""The zygote's heap set aside before it forks (``warm/heap.py``): a fork that only reads the zygote's
objects copies few of its pages, the objects keep working, and an interpreter that counts references
otherwise is only frozen, with the reason.

Each test runs in a fresh interpreter: ``settle`` marks every object of the process it runs in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from hybrid_operator.ansible.warm import heap

MARKS = not heap.problems()
needs_marking = pytest.mark.skipif(not MARKS, reason=f"objects are not marked here: {'; '.join(heap.problems())}")


def _python(script: str, **env: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


_FORK_READS = """
    import gc, json, os, resource, sys
    from hybrid_operator.ansible.warm import heap

    data = [{"name": str(i), "values": [i, str(i), (i, "x")]} for i in range(150_000)]
    settled = heap.settle() if sys.argv[-1] != "freeze-only" else (gc.collect(), gc.freeze())
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        total = 0
        for entry in data:  # reads only: takes and drops a reference to each object
            total += len(entry["values"]) + len(entry["name"])
        after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        os.write(write, json.dumps({"faults": after - before, "total": total}).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    print(os.read(read, 1000).decode())
"""


@needs_marking
def test_a_fork_that_reads_a_settled_heap_copies_few_of_its_pages() -> None:
    settled = _python(_FORK_READS)
    frozen = _python(_FORK_READS.replace('sys.argv[-1] != "freeze-only"', "False"))
    assert settled["total"] == frozen["total"]
    # Frozen only, every page of the 150,000 dicts, lists and strings is written (their counts) and copied.
    assert int(frozen["faults"]) > 5_000, frozen
    assert int(settled["faults"]) * 10 < int(frozen["faults"]), (settled, frozen)


@needs_marking
def test_settled_objects_keep_working_and_new_ones_are_still_freed() -> None:
    result = _python(
        """
        import gc, json, sys, weakref
        from hybrid_operator.ansible.warm import heap

        class Box:
            pass

        kept = {"a": [1, 2], "b": Box()}
        settled = heap.settle()
        count = sys.getrefcount(kept)
        more = [kept] * 100
        moved = sys.getrefcount(kept) - count
        del more
        kept["a"].append(3)          # a marked object is mutable as before
        kept["b"] = Box()            # and what it held is replaced as before
        freed = []
        fresh = Box()
        weakref.finalize(fresh, freed.append, "fresh")
        del fresh                    # objects made after settle are counted and freed
        cycle = [Box()]
        cycle.append(cycle)
        weakref.finalize(cycle[0], freed.append, "cycle")
        del cycle
        gc.collect()                 # and the collector still frees new cycles
        print(json.dumps({
            "immortal": settled.immortal, "why_not": settled.why_not, "moved": moved,
            "a": kept["a"], "b": type(kept["b"]).__name__, "freed": sorted(freed),
            "frozen": gc.get_freeze_count(),
        }))
        """
    )
    assert result["why_not"] == ""
    assert int(result["immortal"]) > 1_000
    assert result["moved"] == 0
    assert result["a"] == [1, 2, 3]
    assert result["b"] == "Box"
    assert result["freed"] == ["cycle", "fresh"]
    assert int(result["frozen"]) > 0


def test_switched_off_it_only_freezes_and_says_why() -> None:
    result = _python(
        """
        import gc, json, sys
        from hybrid_operator.ansible.warm import heap

        kept = ["x"]
        settled = heap.settle()
        count = sys.getrefcount(kept)
        more = [kept] * 10
        print(json.dumps({"immortal": settled.immortal, "why_not": settled.why_not,
                          "moved": sys.getrefcount(kept) - count, "frozen": gc.get_freeze_count(),
                          "describe": settled.describe()}))
        """,
        **{heap.DISABLE_ENV: "0"},
    )
    assert result["immortal"] == 0
    assert f"{heap.DISABLE_ENV}=0" in str(result["why_not"])
    assert result["moved"] == 10
    assert int(result["frozen"]) > 0
    assert "frozen, not immortal" in str(result["describe"])


@pytest.mark.parametrize(("version", "says"), [((3, 11, 9), "3.11"), ((3, 14, 0), "3.14"), ((3, 15, 0), "3.15")])
def test_interpreters_that_count_otherwise_are_named(version: tuple[int, int, int], says: str) -> None:
    found = heap.problems(version)
    assert any(says in problem and "counts references differently" in problem for problem in found), found


def test_the_interpreters_it_marks_on() -> None:
    for version in ((3, 12, 0), (3, 13, 5)):
        assert not any("counts references differently" in problem for problem in heap.problems(version))
