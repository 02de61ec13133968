"""API requests per Foo create, counted at the API server: what one Foo costs the cluster, by verb and resource.

    KUBECONFIG=... .venv/bin/python -m bench.apirequests [--foos 5] [-- extra operator flags]

Where it sits: a bench tool beside ``python -m bench`` (numbers, never pass/fail). It starts the operator
(``hybrid-operator run``, the working tree's) on a namespace of its own watching ``roles/foo`` with
``watchDependentStatusChanges``, creates one warm-up Foo and then ``--foos`` Foos one at a time, each waited
for (its Deployment available and the status written, seen by a watch of the bench, which makes no GETs) and
given a few seconds for the run its Deployment's status wakes. It reads ``apiserver_request_total`` before
and after, subtracts an idle window of the same length (the API server's and the bed's own requests), and
prints the requests per Foo by verb, group, resource and subresource. WATCHes are left out (they are
long-lived: a count of them is a count of reconnects). Run it on a quiet test bed: the counter is the
whole server's.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time

from bench import fooop
from bench.cluster import FOO, Cluster, Tracker, foo_available

_LABELS = re.compile(r'(\w+)="([^"]*)"')
Key = tuple[str, str, str, str]  # verb, group, resource, subresource


def requests(cluster: Cluster) -> collections.Counter[Key]:
    """``apiserver_request_total`` summed by (verb, group, resource, subresource), WATCHes left out."""
    out: collections.Counter[Key] = collections.Counter()
    for line in cluster.apiserver_metrics().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(_LABELS.findall(line))
        if labels.get("verb") in ("WATCH", "WATCHLIST"):
            continue
        verb, group, resource = labels.get("verb", ""), labels.get("group", ""), labels.get("resource", "")
        out[(verb, group, resource, labels.get("subresource", ""))] += int(float(line.rsplit(" ", 1)[1]))
    return out


def foo(name: str) -> dict[str, object]:
    return {
        "apiVersion": FOO.api_version,
        "kind": FOO.kind,
        "metadata": {"name": name},
        "spec": {"deploymentName": name, "replicas": 1},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.apirequests", description=__doc__.split("\n\n")[0])
    parser.add_argument("--foos", type=int, default=5, help="Foos counted, after one warm-up Foo (default 5)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after each Foo converged (default 3)")
    fooop.operator_arguments(parser)
    args = fooop.parsed(parser, argv)
    op = fooop.start(args.kubeconfig, "bench-requests", args.operator_args)
    cluster = op.cluster
    tracker = Tracker(cluster, FOO, op.namespace, foo_available)
    try:
        tracker.start()
        before = started = None
        for index, name in enumerate(["warm-up"] + [f"foo-{i}" for i in range(args.foos)]):
            if index == 1:
                time.sleep(2 * args.settle)
                before, started = requests(cluster), time.monotonic()
            cluster.custom.create_namespaced_custom_object(FOO.group, FOO.version, op.namespace, FOO.plural, foo(name))
            if tracker.wait_for(name, 180) is None:
                print(f"{name} did not converge in 180 s; the operator's log: {op.log}", file=sys.stderr)
                return 1
            time.sleep(args.settle)
        assert before is not None and started is not None
        after, window = requests(cluster), time.monotonic() - started
        tracker.stop()
        time.sleep(args.settle)
        idle_start = requests(cluster)
        time.sleep(window)
        idle = requests(cluster) - idle_start
    finally:
        op.stop()
    rows = []
    for key in sorted(set(after) | set(idle)):
        per_foo = (after[key] - before[key] - idle[key]) / args.foos
        if abs(per_foo) >= 0.1:
            rows.append((per_foo, key))
    total = sum(per for per, _ in rows)
    print(f"API requests per Foo create: {total:.1f} (the operator and its runs; {args.foos} Foos, ", end="")
    print(f"an idle window of {window:.0f} s subtracted)")
    for per, (verb, group, resource, sub) in sorted(rows, reverse=True):
        print(f"  {per:5.1f}  {verb:<7} {'/'.join(p for p in (group, resource, sub) if p)}")
    op.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
