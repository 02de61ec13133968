"""What an object costs the operator's main process: its RSS with none, then at rest with N of them.

    python -m bench.memory --objects 2000                 # Trivials (bench/projects/trivial, one debug task)
    python -m bench.memory --objects 2000 --ref main      # the operator package of a git ref: a before/after
    python -m bench.memory --objects 1000 --kind foo      # Foos, each with the Deployment its run creates
    python -m bench.memory --objects 2000 --fields 70     # Trivials with 70 spec fields: ~4.4 KB as served

One operator (``hybrid-operator run``, the warm executor) on a namespace of its own. Its main process's
RSS is read (``/proc/PID/stat``) once it is ready and idle with no object, then N objects are created at
once and, once every one is ``Successful`` (Foos: available as well) and no run has started for
``--settle`` seconds, read again, five times over ten seconds (the median). The cost of one object is the
difference over N. Also printed: an object as the API server returns it (bytes of JSON, managedFields
included), and the whole process tree (the warm executor's zygote and its forks) at both moments.
Numbers only, never pass or fail; ``--json PATH`` also writes them to a file.

``--ref`` runs the ``hybrid_operator`` package of that commit, everything else from the working tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import procs
from bench.cluster import FOO, TRIVIAL, Cluster, Kind, Tracker, foo_available, successful
from bench.contenders import Tools
from bench.fairness import _describe, _package_at, _start, _stop
from bench.run import _kubeconfig
from bench.scenarios import foo_body, trivial_body, watches_file
from bench.scraping import http_get, metric_sum

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", help="default: $KUBECONFIG, else the local test bed")
    p.add_argument("--ref", help="run the operator package of this git ref (default: the working tree)")
    p.add_argument("--objects", type=int, default=2000, help="objects created (default 2000)")
    p.add_argument("--kind", choices=("trivial", "foo"), default="trivial")
    p.add_argument(
        "--fields",
        type=int,
        default=0,
        help="Trivials: this many small spec fields each (their managedFields grow with them; 70: ~4.4 KB)",
    )
    p.add_argument("--settle", type=float, default=15, help="seconds without a run that count as at rest")
    p.add_argument("--timeout", type=float, default=3600, help="seconds to wait for every object")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    args = p.parse_args(argv)

    cluster = Cluster(_kubeconfig(args.kubeconfig or os.environ.get("KUBECONFIG")))
    cluster.ensure_crds([ROOT / "bench" / "crds" / "trivial.yaml", ROOT / "deploy" / "crds" / "foo.yaml"])
    work = Path(tempfile.mkdtemp(prefix="hybrid-operator-memory-"))
    source = _package_at(args.ref, work) if args.ref else ROOT
    kind = FOO if args.kind == "foo" else TRIVIAL
    tools = Tools(cluster.kubeconfig, work)
    result = measure(cluster, tools, source, kind, args.objects, args.settle, args.timeout, fields=args.fields)
    result["operator"] = f"{args.ref or 'working tree'} ({_describe(args.ref or 'HEAD')})"
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def measure(
    cluster: Cluster,
    tools: Tools,
    source: Path,
    kind: Kind,
    count: int,
    settle: float,
    timeout: float,
    *,
    fields: int = 0,
) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    namespace = f"bench-memory-{run_id}"
    cluster.create_namespace(namespace, run_id)
    watches = watches_file(tools, (kind,), status_wake=True)
    operator, metrics_port = _start(tools, source, namespace, run_id, watches=watches)
    done = foo_available if kind == FOO else successful
    tracker = Tracker(cluster, kind, namespace, lambda obj: done(obj) and successful(obj))
    try:
        tracker.start()
        _at_rest(metrics_port, settle, timeout)
        empty = _rss(operator.pid)
        names = [f"m-{i:05d}" for i in range(count)]
        started = time.monotonic()
        cluster.create_many(kind, namespace, [_body(kind, name, fields) for name in names])
        deadline = started + timeout
        while len(tracker.snapshot()) < count:
            if time.monotonic() > deadline or operator.poll() is not None:
                raise RuntimeError(f"only {len(tracker.snapshot())} of {count} converged")
            time.sleep(1)
        converged = time.monotonic() - started
        _at_rest(metrics_port, settle, timeout)
        full = _rss(operator.pid)
        sample = cluster.get(kind, namespace, names[0])
        metrics_text = http_get(f"http://127.0.0.1:{metrics_port}/metrics")[1]
        return {
            "kind": kind.kind,
            "objects": count,
            "spec_fields": fields,
            "object_json_bytes": len(json.dumps(sample, separators=(",", ":"))),
            "converged_seconds": converged,
            "runs": metric_sum(metrics_text, "ansible_operator_reconciles_count"),
            "main_rss_empty_bytes": empty["main"],
            "main_rss_at_rest_bytes": full["main"],
            "tree_rss_empty_bytes": empty["tree"],
            "tree_rss_at_rest_bytes": full["tree"],
            "bytes_per_object": (full["main"] - empty["main"]) / count,
        }
    finally:
        tracker.stop()
        _stop(operator)
        cluster.delete_namespaces([namespace], 600)


def _body(kind: Kind, name: str, fields: int) -> dict[str, Any]:
    if kind == FOO:
        return foo_body(name)
    body = trivial_body(name)
    body["spec"] = {f"option{i:03d}": f"value-{i:03d}" for i in range(fields)}
    return body


def _at_rest(metrics_port: int, settle: float, timeout: float) -> None:
    """Wait until no run started or finished for ``settle`` seconds and none is in flight."""
    deadline = time.monotonic() + timeout
    last, since = -1.0, time.monotonic()
    while time.monotonic() < deadline:
        text = http_get(f"http://127.0.0.1:{metrics_port}/metrics")[1]
        runs = metric_sum(text, "ansible_operator_reconciles_count")
        busy = metric_sum(text, "hybrid_operator_runs_in_flight") + metric_sum(text, "hybrid_operator_queue_depth")
        if runs != last or busy:
            last, since = runs, time.monotonic()
        elif time.monotonic() - since >= settle:
            return
        time.sleep(1)
    raise RuntimeError("the operator never came to rest")


def _rss(pid: int) -> dict[str, int]:
    """The main process's RSS and the whole tree's, each the median of five looks over ten seconds."""
    main, tree = [], []
    for _ in range(5):
        proc = procs.read(pid)
        main.append(proc.rss_bytes if proc else 0)
        tree.append(procs.usage(pid).rss_bytes)
        time.sleep(2)
    return {"main": int(statistics.median(main)), "tree": int(statistics.median(tree))}


def report(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"operator: {r['operator']}",
            f"{r['objects']} {r['kind']}s ({r['object_json_bytes']} bytes of JSON each as the API server returns "
            f"them, managedFields included), converged in {r['converged_seconds']:.0f} s, {r['runs']:.0f} runs",
            f"main process RSS: {r['main_rss_empty_bytes'] / MiB:.1f} MiB empty -> "
            f"{r['main_rss_at_rest_bytes'] / MiB:.1f} MiB at rest: {r['bytes_per_object'] / 1024:.1f} KiB per object",
            f"process tree RSS: {r['tree_rss_empty_bytes'] / MiB:.1f} -> {r['tree_rss_at_rest_bytes'] / MiB:.1f} MiB",
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
