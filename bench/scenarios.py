"""The four scenarios. Each starts one contender fresh in a namespace of its own, measures, stops it
(the restart scenario, ``restarting``, shares one world of converged Foos between the contenders).

- P1 latency: create one object, wait for ``Successful=True``, next; N times for the trivial role and
  for the Foo role, after one warm-up object each (not counted: it pays for caches and imports).
- P2 burst: N Foos created at once (after one warm-up Foo); seconds until every Foo reports
  ``availableReplicas == spec.replicas`` and each Deployment exists with the replicas asked for.
- P3 idle: N trivial objects, wait until all are ``Successful``, let it settle, then an idle window:
  memory of the process tree at its end, CPU seconds and API requests during it.
- P4 artifacts: K trivial objects with the reconcile-period annotation at 1s until the contender has
  done R runs (its own ``ansible_operator_reconciles`` count), stop it, measure what its artifacts
  take on disk.

Results are plain dicts (they go to JSON as they are); ``report`` turns them into the table.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cluster import FOO, TRIVIAL, Cluster, Kind, Obj, Tracker, foo_available, successful
from bench.contenders import Contender, Running, Tools
from bench.scraping import metric_sum

ROOT = Path(__file__).resolve().parent.parent
PERIOD_ANNOTATION = "ansible.sdk.operatorframework.io/reconcile-period"
Result = dict[str, Any]


@dataclass(frozen=True)
class Settings:
    p1: int
    p2: tuple[int, ...]
    p3: int
    p3_idle: float
    p4_runs: int
    p4_objects: int
    p1_timeout: float
    p2_timeout: float
    p3_timeout: float
    p4_timeout: float
    settle: float = 5.0
    namespace_timeout: float = 300.0
    heavy_rounds: int = 5  # heavy and kiali: rounds after one warm-up round
    restart: tuple[int, ...] = (1000,)  # restart: converged Foos the contenders start on
    restart_world: str = "cloned"  # restart: how that world is made (``restarting``: converged or cloned)


@dataclass
class Context:
    cluster: Cluster
    tools: Tools
    settings: Settings
    run_id: str
    namespaces: list[str] = field(default_factory=list)  # created and not yet seen gone
    idle_baseline: Result | None = None
    worlds: dict[int, Any] = field(default_factory=dict)  # restart: the converged Foos per size
    worlds_reported: dict[int, bool] = field(default_factory=dict)
    discarded: list[Path] = field(default_factory=list)  # artifact dirs moved aside, removed when the run ends

    def discard(self, directory: Path) -> None:
        """Move a contender's artifacts aside (a rename beside them: no file is freed) for ``remove_discarded``
        at the end of the run. Removed at once, the thousands of files a scenario leaves would slow the next
        contender's own files for minutes on a disk that skips recently freed inodes (ext4 without a journal:
        docs/internals/performance.md, "A run's files, and the disk under them")."""
        if not directory.exists():
            return
        aside = directory.with_name(f".bench-discarded-{self.run_id}-{len(self.discarded)}-{directory.name}")
        try:
            directory.rename(aside)
        except OSError:
            shutil.rmtree(directory, ignore_errors=True)
            return
        self.discarded.append(aside)

    def remove_discarded(self) -> None:
        while self.discarded:
            shutil.rmtree(self.discarded.pop(), ignore_errors=True)


def say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ objects


def trivial_body(name: str, period: str | None = None) -> Obj:
    metadata: Obj = {"name": name}
    if period:
        metadata["annotations"] = {PERIOD_ANNOTATION: period}
    return {"apiVersion": TRIVIAL.api_version, "kind": TRIVIAL.kind, "metadata": metadata, "spec": {}}


def foo_body(name: str, replicas: int = 1) -> Obj:
    return {
        "apiVersion": FOO.api_version,
        "kind": FOO.kind,
        "metadata": {"name": name},
        "spec": {"deploymentName": name, "replicas": replicas},
    }


def watches_file(tools: Tools, kinds: tuple[Kind, ...], status_wake: bool = False, *, skip: bool = False) -> Path:
    """A watches.yaml for these kinds with absolute role paths (the peer needs them); ``status_wake``: the
    Foo watch declares ``watchDependentStatusChanges``, as the project's watches.yaml does; ``skip``: every
    watch has ``skipConvergedAtStart``."""
    roles = {
        TRIVIAL: ROOT / "bench" / "projects" / "trivial" / "roles" / "trivial",
        FOO: ROOT / "roles" / "foo",
    }
    suffix = ("-wake" if status_wake else "") + ("-skip" if skip else "")
    path = tools.work / ("watches-" + "-".join(k.plural for k in kinds) + suffix + ".yaml")
    wake = "  watchDependentStatusChanges: true\n" if status_wake else ""
    skipping = "  skipConvergedAtStart: true\n" if skip else ""
    entries = [
        f"- version: {k.version}\n  group: {k.group}\n  kind: {k.kind}\n  role: {roles[k]}\n"
        + (wake if k == FOO else "")
        + skipping
        for k in kinds
    ]
    path.write_text("---\n" + "".join(entries))
    return path


# ------------------------------------------------------------------------------------------ helpers


def summary(samples: list[float]) -> Result:
    if not samples:
        return {"median": None, "p90": None, "min": None, "max": None}
    p90 = statistics.quantiles(samples, n=10, method="inclusive")[8] if len(samples) > 1 else samples[0]
    return {"median": statistics.median(samples), "p90": p90, "min": min(samples), "max": max(samples)}


def disk_usage(dirs: list[Path]) -> Result:
    files = directories = apparent = allocated = 0
    for top in dirs:
        for root, dirnames, filenames in os.walk(top):
            directories += len(dirnames)
            for name in filenames:
                with contextlib.suppress(OSError):
                    st = os.lstat(os.path.join(root, name))
                    files += 1
                    apparent += st.st_size
                    allocated += st.st_blocks * 512
    return {"files": files, "dirs": directories, "bytes": apparent, "allocated_bytes": allocated}


def apiserver_requests(cluster: Cluster, group: str = TRIVIAL.group) -> tuple[float, float]:
    """Requests the API server has served so far: all of them, and those on ``group``'s resources."""
    text = cluster.apiserver_metrics()
    in_group = f'group="{group}"'
    return metric_sum(text, "apiserver_request_total"), metric_sum(
        text, "apiserver_request_total", lambda labels: in_group in labels
    )


@contextlib.contextmanager
def operator(ctx: Context, contender: Contender, scenario: str, kinds: tuple[Kind, ...]) -> Iterator[Running]:
    """The contender, started fresh in a new namespace; stopped, its artifacts and namespace removed after."""
    namespace = f"bench-{ctx.run_id}-{contender.slug}-{scenario}"
    ctx.cluster.create_namespace(namespace, ctx.run_id)
    ctx.namespaces.append(namespace)
    running = Running.start(
        contender,
        ctx.tools,
        watches_file(ctx.tools, kinds, contender.status_wake),
        namespace,
        f"{contender.slug}-{scenario}",
    )
    try:
        running.wait_ready()
        yield running
    finally:
        code = running.stop()
        if code not in (0, None):
            say(f"{contender.name} exited with {code} on stop; log tail:\n{running.log_tail(10)}")
        for directory in running.artifact_dirs():
            ctx.discard(directory)
        left = ctx.cluster.delete_namespaces([namespace], ctx.settings.namespace_timeout)
        if left:
            say(f"namespace {namespace} still terminating; `python -m bench --cleanup` removes it later")
        else:
            ctx.namespaces.remove(namespace)


def _tracked(ctx: Context, kind: Kind, namespace: str, predicate: Callable[[Obj], bool]) -> Tracker:
    tracker = Tracker(ctx.cluster, kind, namespace, predicate)
    tracker.start()
    return tracker


def _wait_names(
    tracker: Tracker, names: list[str], timeout: float, alive: Callable[[], bool], stuck: Callable[[], str | None]
) -> str | None:
    """Wait until every name met the tracker's predicate; otherwise say why not.

    After a minute without progress, ``stuck`` is asked whether waiting longer can help at all.
    """
    deadline = time.monotonic() + timeout
    progress, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        done = sum(1 for name in names if name in tracker.first)
        if done == len(names):
            return None
        if not alive():
            return "the operator exited"
        if done != progress:
            progress, since = done, time.monotonic()
        elif time.monotonic() - since > 60:
            if (problem := stuck()) is not None:
                return problem
            since = time.monotonic()
        time.sleep(0.2)
    return f"timed out after {timeout:.0f}s"


def _unready_pods(cluster: Cluster, namespace: str) -> Callable[[], str | None]:
    def check() -> str | None:
        stuck = cluster.pods_stuck_unready(namespace)
        if not stuck:
            return None
        return (
            f"test bed: {stuck} pods have ready containers but Ready=False (the fake node missed heartbeats and "
            "was marked NotReady; nothing sets Ready back), so availableReplicas cannot reach spec.replicas"
        )

    return check


# ----------------------------------------------------------------------------------------------- P1


def p1(ctx: Context, contender: Contender) -> Result:
    out: Result = {}
    with operator(ctx, contender, "p1", (TRIVIAL, FOO)) as op:
        for role, kind, make in (("trivial", TRIVIAL, trivial_body), ("foo", FOO, foo_body)):
            tracker = _tracked(ctx, kind, op.namespace, successful)
            samples: list[float] = []
            warmup: float | None = None
            failures = 0
            errors: list[str] = []
            try:
                for i in range(ctx.settings.p1 + 1):
                    name = f"{role}-{i:04d}"
                    start = time.monotonic()
                    ctx.cluster.create(kind, op.namespace, make(name))
                    done = tracker.wait_for(name, ctx.settings.p1_timeout)
                    if done is None:
                        failures += 1
                        why = tracker.failed.get(name) or f"not Successful after {ctx.settings.p1_timeout:.0f}s"
                        errors.append(f"{name}: {why}")
                        say(f"p1 {contender.name} {role}: {errors[-1]}")
                        if failures >= 2 or not op.alive():
                            break
                        continue
                    if i == 0:
                        warmup = done - start
                    else:
                        samples.append(done - start)
            finally:
                tracker.stop()
            out[role] = {"n": len(samples), "samples": samples, "warmup": warmup, "failures": failures}
            out[role].update(summary(samples))
            if errors and not samples:
                out[role]["error"] = errors[0][:300]
            say(f"p1 {contender.name} {role}: median {_fmt(out[role]['median'])} s over {len(samples)}")
    return out


# ----------------------------------------------------------------------------------------------- P2


def p2(ctx: Context, contender: Contender, count: int) -> Result:
    with operator(ctx, contender, f"p2-{count}", (FOO,)) as op:
        available = _tracked(ctx, FOO, op.namespace, foo_available)
        reconciled = _tracked(ctx, FOO, op.namespace, successful)
        try:
            warm = "warmup"
            ctx.cluster.create(FOO, op.namespace, foo_body(warm))
            if reconciled.wait_for(warm, ctx.settings.p1_timeout) is None:
                why = reconciled.failed.get(warm) or f"not Successful within {ctx.settings.p1_timeout:.0f}s"
                raise RuntimeError(f"warm-up Foo: {why}")
            names = [f"foo-{i:05d}" for i in range(count)]
            replicas = {name: 1 + i % 3 for i, name in enumerate(names)}
            cpu0, bed0 = op.usage().cpu_seconds, ctx.cluster.bed_cpu_seconds()
            start = time.monotonic()
            ctx.cluster.create_many(FOO, op.namespace, [foo_body(n, replicas[n]) for n in names])
            created = time.monotonic() - start
            problem = _wait_names(
                available, names, ctx.settings.p2_timeout, op.alive, _unready_pods(ctx.cluster, op.namespace)
            )
            cpu, bed1 = op.usage().cpu_seconds - cpu0, ctx.cluster.bed_cpu_seconds()
            deployments = ctx.cluster.deployment_replicas(op.namespace)
        finally:
            available.stop()
            reconciled.stop()
        wrong = sorted(n for n in names if deployments.get(n) != replicas[n])
        seen_available, seen_reconciled = available.snapshot(), reconciled.snapshot()
        done = [seen_available[n] for n in names if n in seen_available]
        first_pass = [seen_reconciled[n] for n in names if n in seen_reconciled]
        if problem is None and wrong:
            problem = f"{len(wrong)} Deployments missing or not at the replicas asked for, e.g. {wrong[0]}"
        seconds = max(done) - start if problem is None else None
        result: Result = {
            "count": count,
            "seconds": seconds,
            "throughput": count / seconds if seconds else None,
            "converged": len(done),
            "all_reconciled_seconds": max(first_pass) - start if len(first_pass) == count else None,
            "create_seconds": created,
            "deployments_wrong": len(wrong),
            "cpu_seconds": cpu,
            # The test bed's own processes meanwhile (on the same cores): None on another cluster.
            "bed_cpu_seconds": bed1 - bed0 if bed0 is not None and bed1 is not None else None,
            "peak_rss_bytes": op.sampler.peak_rss_bytes,
            "runs": op.runs(),
            "proxy_reads": op.proxy_reads(),
            "converged_at": sorted(t - start for t in done),  # seconds after the create calls began (plots)
        }
        if problem is not None:
            result["problem"] = problem
        say(
            f"p2 {contender.name} {count}: "
            + (f"converged in {seconds:.1f} s" if seconds else f"{len(done)}/{count}: {problem}")
        )
        return result


# ----------------------------------------------------------------------------------------------- P3


def idle_baseline(ctx: Context) -> Result:
    """API requests the cluster serves in one idle window with no contender running."""
    idle = ctx.settings.p3_idle
    say(f"p3 baseline: {idle:.0f} s with no operator running")
    before, _ = apiserver_requests(ctx.cluster)
    time.sleep(idle)
    after, _ = apiserver_requests(ctx.cluster)
    return {"seconds": idle, "apiserver_requests": after - before}


def p3(ctx: Context, contender: Contender) -> Result:
    count, idle = ctx.settings.p3, ctx.settings.p3_idle
    with operator(ctx, contender, "p3", (TRIVIAL,)) as op:
        tracker = _tracked(ctx, TRIVIAL, op.namespace, successful)
        try:
            cpu0 = op.usage().cpu_seconds
            start = time.monotonic()
            names = [f"t-{i:05d}" for i in range(count)]
            ctx.cluster.create_many(TRIVIAL, op.namespace, [trivial_body(name) for name in names])
            problem = _wait_names(tracker, names, ctx.settings.p3_timeout, op.alive, lambda: None)
            done = sorted(tracker.snapshot().values())
            cpu_converge = op.usage().cpu_seconds - cpu0
        finally:
            tracker.stop()  # the bench itself makes no API requests during the idle window
        say(f"p3 {contender.name}: {len(done)}/{count} Successful; idle window {idle:.0f} s")
        time.sleep(ctx.settings.settle)
        (api0, kind0), client0, use0 = apiserver_requests(ctx.cluster), op.client_requests(), op.usage()
        time.sleep(idle)
        use1, client1, (api1, kind1) = op.usage(), op.client_requests(), apiserver_requests(ctx.cluster)
        pss = op.pss_bytes()
        baseline = (ctx.idle_baseline or {}).get("apiserver_requests")
        raw = api1 - api0
        return {
            "objects": count,
            "converged": len(done),
            "converge_seconds": done[-1] - start if problem is None and done else None,
            "converge_cpu_seconds": cpu_converge,
            "idle_seconds": idle,
            "rss_bytes": use1.rss_bytes,
            "pss_bytes": pss,
            "processes": use1.processes,
            "idle_cpu_seconds": use1.cpu_seconds - use0.cpu_seconds,
            "apiserver_requests_raw": raw,
            "apiserver_requests": raw - baseline if baseline is not None else None,
            "apiserver_requests_kind": kind1 - kind0,
            "client_requests": client1 - client0 if client0 is not None and client1 is not None else None,
            "peak_rss_bytes": op.sampler.peak_rss_bytes,
            "alive": op.alive(),
            **({"problem": problem} if problem else {}),
        }


# ----------------------------------------------------------------------------------------------- P4


def p4(ctx: Context, contender: Contender) -> Result:
    target, objects = ctx.settings.p4_runs, ctx.settings.p4_objects
    with operator(ctx, contender, "p4", (TRIVIAL,)) as op:
        runs0, cpu0 = op.runs(), op.usage().cpu_seconds
        start = time.monotonic()
        bodies = [trivial_body(f"p-{i:03d}", period="1s") for i in range(objects)]
        ctx.cluster.create_many(TRIVIAL, op.namespace, bodies)
        deadline = start + ctx.settings.p4_timeout
        runs, last_said = 0.0, start
        while time.monotonic() < deadline and op.alive():
            runs = op.runs() - runs0
            if runs >= target:
                break
            if time.monotonic() - last_said > 60:
                say(f"p4 {contender.name}: {runs:.0f}/{target} runs")
                last_said = time.monotonic()
            time.sleep(1)
        runs = op.runs() - runs0 if op.alive() else runs
        seconds = time.monotonic() - start
        cpu = op.usage().cpu_seconds - cpu0
        op.stop()  # nothing may write while the artifacts are measured
        disk = disk_usage(op.artifact_dirs())
        say(f"p4 {contender.name}: {runs:.0f} runs in {seconds:.0f} s, {disk['files']} files, {disk['bytes']} bytes")
        return {
            "target_runs": target,
            "runs": runs,
            "objects": objects,
            "seconds": seconds,
            "runs_per_second": runs / seconds if seconds else None,
            "cpu_seconds": cpu,
            "cpu_per_run": cpu / runs if runs else None,
            "artifact_dirs": len(op.artifact_dirs()),
            **disk,
        }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
