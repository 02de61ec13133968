"""Where a Foo create's time goes until ``Successful``, seen from outside the operator, step by step.

    KUBECONFIG=... .venv/bin/python -m bench.createtrace [--foos 15] [--gap 3] [-- extra operator flags]

Where it sits: a bench tool beside ``python -m bench`` (numbers, never pass/fail). It starts the operator
(``hybrid-operator run``, the working tree's) on a namespace of its own watching ``roles/foo`` with
``watchDependentStatusChanges`` (as P1 runs it), creates one warm-up Foo and then ``--foos`` Foos one at a
time. ``--gap`` seconds after each Foo is ``Successful`` the next is created: the default leaves time for the
run its Deployment's status wakes, so each create has the operator to itself; ``--gap 0`` creates the next
at once, as P1 does, where that run and the next Foo's first run overlap.

Each moment is on the bench's clock: the create call returned, the Foo's ``Running`` condition seen (the
status the operator writes before the run), the Deployment seen (the role's apply, inside the run), the run's
end (the operator's ``reconciled`` log line, written when the run's result is known and before the status
write; its ``duration`` gives the run's start) and ``Successful`` seen. Prints the median of each step and
of the whole, in milliseconds. The log's timestamps are wall-clock milliseconds: the bench and the operator
share this machine's clock.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench import fooop
from bench.apirequests import foo
from bench.cluster import FOO, Kind, Tracker, condition_true, successful

DEPLOYMENT = Kind("apps", "v1", "deployments", "Deployment")
STEPS = (
    ("create call", "asked", "created"),
    ("until Running is seen (operator: event, queue, Running written)", "created", "running"),
    ("until the run starts", "running", "run_start"),
    ("the run until its Deployment is seen", "run_start", "deployment"),
    ("the rest of the run", "deployment", "run_end"),
    ("until Successful is seen (status written, watch)", "run_end", "successful"),
    ("create -> Successful", "asked", "successful"),
)


def run_ends(log: Path, namespace: str) -> dict[str, tuple[float, float]]:
    """Each Foo's first run in the operator's log: (wall-clock end, duration in seconds)."""
    ends: dict[str, tuple[float, float]] = {}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if " reconciled kind=Foo." not in line or f"namespace={namespace} " not in line:
            continue
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        stamp = datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        end = stamp.timestamp()
        ends.setdefault(fields["name"], (end, float(fields["duration"])))
    return ends


def print_steps(
    moments: dict[str, dict[str, float]], trackers: dict[str, Tracker], ends: dict[str, tuple[float, float]],
    wall: float, gap: float,
) -> None:  # fmt: skip
    """The median of each step over the traced Foos (the warm-up left out), a line each, then as JSON."""
    rows: dict[str, list[float]] = {label: [] for label, _, _ in STEPS}
    for name, at in moments.items():
        if name == "warm-up" or name not in ends:
            continue
        for key, tracker in trackers.items():
            at[key] = tracker.first.get(name, float("nan"))
        end, duration = ends[name]
        at["run_end"], at["run_start"] = end - wall, end - wall - duration
        for label, start, stop in STEPS:
            rows[label].append((at[stop] - at[start]) * 1000)
    report = {label: round(statistics.median(values), 1) for label, values in rows.items() if values}
    print(f"Foo create -> Successful, {len(rows[STEPS[0][0]])} Foos, --gap {gap:g} s (medians, ms):")
    for label, value in report.items():
        print(f"  {value:7.1f}  {label}")
    print(json.dumps({"gap": gap, "median_ms": report}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.createtrace", description=__doc__.split("\n\n")[0])
    parser.add_argument("--foos", type=int, default=15, help="Foos traced, after one warm-up Foo (default 15)")
    parser.add_argument("--gap", type=float, default=3.0, help="seconds between a Successful and the next create")
    fooop.operator_arguments(parser)
    args = fooop.parsed(parser, argv)
    op = fooop.start(args.kubeconfig, "bench-trace", args.operator_args)
    cluster, namespace = op.cluster, op.namespace
    trackers = {
        "running": Tracker(cluster, FOO, namespace, lambda obj: condition_true(obj, "Running")),
        "successful": Tracker(cluster, FOO, namespace, successful),
        "deployment": Tracker(cluster, DEPLOYMENT, namespace, lambda obj: True),
    }
    wall = time.time() - time.monotonic()  # the log's wall clock on the trackers' monotonic one
    moments: dict[str, dict[str, float]] = {}
    try:
        for tracker in trackers.values():
            tracker.start()
        for name in ["warm-up"] + [f"foo-{i}" for i in range(args.foos)]:
            asked = time.monotonic()
            cluster.custom.create_namespaced_custom_object(FOO.group, FOO.version, namespace, FOO.plural, foo(name))
            moments[name] = {"asked": asked, "created": time.monotonic()}
            deadline = time.monotonic() + 180
            while trackers["successful"].wait_for(name, 1) is None:
                if op.process.poll() is not None or time.monotonic() > deadline:
                    why = "the operator ended" if op.process.poll() is not None else "not Successful in 180 s"
                    print(f"{name}: {why}; the operator's log: {op.log}", file=sys.stderr)
                    return 1
            time.sleep(args.gap)
        time.sleep(1)  # the last run's log line
    finally:
        op.stop()
        for tracker in trackers.values():
            tracker.stop()
    print_steps(moments, trackers, run_ends(op.log, namespace), wall, args.gap)
    op.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
