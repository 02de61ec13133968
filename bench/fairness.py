"""How long one tenant's new object waits while another tenant floods the operator (the work queue's fairness).

    python -m bench.fairness                       # the working tree's operator
    python -m bench.fairness --ref main            # the operator as it is at a git ref (before a change)
    python -m bench.fairness --flood 120 --rounds 3

One operator (``hybrid-operator run``, the warm executor, default concurrency) watches two namespaces
of its own, ``a`` and ``b``, with ``roles/foo`` (status wakes, as the project's watches.yaml). Each
round: one Foo in ``b`` alone (the baseline), then tenant A creates ``--flood`` Foos in ``a`` as fast as
the API server takes them and, once the operator has them all (its metrics: queued + running + runs done
since the flood began), tenant B creates one Foo in ``b``. Waiting for that makes the figure the queue's:
otherwise B's single event can overtake A's still streaming in on their watch. Reported per round: B's
wait from its create call to ``Successful=True`` (seen through a watch), alone and under the flood, how
many of A's Foos were Successful before B's, and how long A's flood took to converge in all (a fair queue
must not starve it). Numbers only, never pass or fail.

``--ref`` runs the ``hybrid_operator`` package of that commit (``git archive`` into a scratch dir, put
first on PYTHONPATH), everything else from the working tree: the same roles, CRDs and virtualenv.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

from bench.cluster import FOO, Cluster, Tracker, successful
from bench.contenders import Tools, free_port
from bench.run import _kubeconfig
from bench.scenarios import foo_body, watches_file
from bench.scraping import http_get, metric_sum

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fairness", description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", help="default: $KUBECONFIG, else the local test bed")
    p.add_argument("--ref", help="run the operator package of this git ref (default: the working tree)")
    p.add_argument("--flood", type=int, default=120, help="Foos tenant A creates at once (default 120)")
    p.add_argument("--rounds", type=int, default=1, help="rounds, each in fresh namespaces (default 1)")
    p.add_argument("--timeout", type=float, default=900, help="seconds to wait for a flood to converge")
    args = p.parse_args(argv)

    cluster = Cluster(_kubeconfig(args.kubeconfig or os.environ.get("KUBECONFIG")))
    cluster.ensure_crds([ROOT / "deploy" / "crds" / "foo.yaml"])
    work = Path(tempfile.mkdtemp(prefix="hybrid-operator-fairness-"))
    source = _package_at(args.ref, work) if args.ref else ROOT
    print(f"operator: {args.ref or 'working tree'} ({_describe(args.ref or 'HEAD')}); flood {args.flood}")
    print(f"{'round':>5} {'B alone s':>10} {'B under flood s':>16} {'A done before B':>16} {'A flood s':>10}")
    alone, flooded = [], []
    for round_no in range(1, args.rounds + 1):
        result = _round(cluster, Tools(cluster.kubeconfig, work), source, args.flood, args.timeout)
        alone.append(result[0])
        flooded.append(result[1])
        print(f"{round_no:>5} {result[0]:>10.2f} {result[1]:>16.2f} {result[2]:>16d} {result[3]:>10.1f}")
    if args.rounds > 1:
        print(f"median {statistics.median(alone):>10.2f} {statistics.median(flooded):>16.2f}")
    return 0


def _round(cluster: Cluster, tools: Tools, source: Path, flood: int, timeout: float) -> tuple[float, float, int, float]:
    """(B alone, B under the flood, A's Foos Successful before B's, A's whole flood) in seconds."""
    run_id = uuid.uuid4().hex[:6]
    ns_a, ns_b = f"fair-a-{run_id}", f"fair-b-{run_id}"
    for ns in (ns_a, ns_b):
        cluster.create_namespace(ns, run_id)
    operator, metrics_port = _start(tools, source, f"{ns_a},{ns_b}", run_id)
    trackers = [Tracker(cluster, FOO, ns, successful) for ns in (ns_a, ns_b)]
    try:
        for tracker in trackers:
            tracker.start()
        track_a, track_b = trackers
        alone = _wait_one(cluster, track_b, ns_b, "b-alone", timeout)
        time.sleep(3)  # b-alone's Deployment wakes it once more: let that run pass
        base = _seen(metrics_port)
        started = time.monotonic()
        cluster.create_many(FOO, ns_a, [foo_body(f"a-{i}") for i in range(flood)])
        while _seen(metrics_port) - base < flood and time.monotonic() - started < 60:
            time.sleep(0.05)
        new_b = _wait_one(cluster, track_b, ns_b, "b-new", timeout)
        b_done = track_b.snapshot()["b-new"]
        deadline = time.monotonic() + timeout
        while len(track_a.snapshot()) < flood and time.monotonic() < deadline and operator.poll() is None:
            time.sleep(0.5)
        done_a = track_a.snapshot()
        if len(done_a) < flood:
            raise RuntimeError(f"only {len(done_a)} of {flood} Foos in {ns_a} converged")
        return alone, new_b, sum(t < b_done for t in done_a.values()), max(done_a.values()) - started
    finally:
        for tracker in trackers:
            tracker.stop()
        _stop(operator)
        cluster.delete_namespaces([ns_a, ns_b], 120)


def _wait_one(cluster: Cluster, tracker: Tracker, namespace: str, name: str, timeout: float) -> float:
    """Create one Foo and return the seconds from the create call to Successful=True."""
    start = time.monotonic()
    cluster.create(FOO, namespace, foo_body(name))
    done = tracker.wait_for(name, timeout)
    if done is None:
        raise RuntimeError(f"{namespace}/{name} did not converge: {tracker.failed.get(name, 'timed out')}")
    return done - start


def _seen(metrics_port: int) -> float:
    """Keys the operator has queued, is running or ran: how many of the flood it has seen, and more."""
    text = http_get(f"http://127.0.0.1:{metrics_port}/metrics")[1]
    names = ("hybrid_operator_queue_depth", "hybrid_operator_runs_in_flight", "ansible_operator_reconciles_count")
    return sum(metric_sum(text, name) for name in names)


def _start(
    tools: Tools, source: Path, namespaces: str, label: str, watches: Path | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """The operator of ``source`` on ``namespaces``, ready; ``watches``: default the Foo watch (status wakes)."""
    health, metrics = free_port(), free_port()
    env = {**os.environ, "KUBECONFIG": tools.kubeconfig, "WATCH_NAMESPACE": namespaces}
    if source != ROOT:  # never the repository itself: its operator.py would shadow the standard library
        # The editable install's finder comes after PYTHONPATH: the package of --ref is the one imported.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(source), env.get("PYTHONPATH")) if p)
    where = subprocess.run(
        [sys.executable, "-c", "import hybrid_operator; print(hybrid_operator.__file__)"],
        env=env,
        cwd=tools.work,
        capture_output=True,
        text=True,
        check=True,
    )
    print(f"  operator package: {Path(where.stdout.strip()).parent}", flush=True)
    watches = watches or watches_file(tools, (FOO,), True)
    cmd = [sys.executable, "-m", "hybrid_operator", "run", "--watches-file", str(watches)]
    cmd += ["--health-probe-bind-address", f"127.0.0.1:{health}", "--metrics-bind-address", f"127.0.0.1:{metrics}"]
    cmd += ["--user-metrics-bind-address", "127.0.0.1:0", "--runner-artifacts-dir", str(tools.work / label)]
    with (tools.work / f"operator-{label}.log").open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tools.work, start_new_session=True
        )
    deadline = time.monotonic() + 120
    while http_get(f"http://127.0.0.1:{health}/readyz", timeout=2)[0] != 200:
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            raise RuntimeError(f"the operator did not become ready; log in {tools.work}")
        time.sleep(0.2)
    return proc, metrics


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _package_at(ref: str, work: Path) -> Path:
    """The ``hybrid_operator`` package of ``ref``, extracted under ``work``; the directory to import it from."""
    target = work / f"src-{ref.replace('/', '-')}"
    target.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", ref, "hybrid_operator"], check=True, capture_output=True
    )
    tar_path = work / "src.tar"
    tar_path.write_bytes(archive.stdout)
    with tarfile.open(tar_path) as tar:
        tar.extractall(target, filter="data")
    return target


def _describe(ref: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", ref], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip()[:80] or "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
