"""The restart scenario: N converged Foos exist, the operator starts. What does the start cost?

One world per N, shared by the contenders (``python -m bench --scenarios restart --restart 1000``):

1. Setup, once: our operator (with ``skipConvergedAtStart``, so that its runs leave the records
   ``warm-skip`` reads) starts on an empty namespace; its main process's RSS is read idle. With
   ``--restart-world converged``, N Foos are then created at once (replicas 1: N Deployments, N pods), and
   once every one is available and ``Successful`` and no run has started for a while, the RSS is read
   again: the memory at rest with N objects and N owned Deployments, and what one of each costs. With
   ``--restart-world cloned`` (the default; converging takes 801 s per 1,000 Foos on 2 cores) the
   operator converges ``cloning.TEMPLATES`` Foos the same way and stops; ``cloning`` copies them into the
   other N - 20 (Foo, Deployment as the role makes it, status and record as a run leaves them); the setup
   operator starts again on the world and must report every Foo ``skipped`` at its start-up check, and
   the RSS at rest is read once that is done. The setup operator stops.
2. Each contender in turn starts on that namespace. Right after its /readyz a new Foo is created (its
   latency meanwhile is the create call to ``Successful=True``, and how many runs ended before it). Its
   work is counted from its metrics: runs (``ansible_operator_reconciles``, both sides) plus, for ours, the
   objects the start-up check decided (``hybrid_operator_startup_checks_total``). Measured from the process
   start: the time to its first run; the time until the start-up work is done (every converged Foo run,
   skipped or checked: the count, the new Foo's runs included, reached N); the CPU of its process tree
   until then; and its main process's RSS once at rest (nothing ran for ``QUIET`` seconds, or ``SETTLE``
   seconds passed since the work was done: at 10,000 Foos the periodic resyncs alone leave no quiet).
   The new Foo is deleted and the contender stopped before the next one starts.

A contender that re-runs every Foo at start (``warm``, the peer) leaves the world as converged as it found
it, so the order of the contenders does not matter; ``warm-skip`` goes first where it is listed. Each
contender's ``deployments_changed`` counts the Deployments of the world its start made again, changed or
deleted: 0 for a world that was converged (made or copied) as runs leave it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from bench import cloning, procs
from bench.cluster import FOO, Tracker, foo_available, successful
from bench.contenders import CONTENDERS, Contender, Running
from bench.scenarios import Context, Result, foo_body, say, watches_file
from bench.scraping import metric_sum

QUIET = 15.0  # seconds without a run or a check after the start-up work that count as at rest
# ... or this long after the start-up work: with thousands of Foos their periodic resyncs never leave QUIET
# seconds free (10,000 Foos with the default 10 h period: one run every 3.6 s on average)
SETTLE = 60.0
SETUP = "warm-skip"  # the contender that converges the world (its runs leave the records warm-skip reads)
POD_ROOM = 9000  # pods the bed's first fake node takes before the bench adds another


@dataclass
class World:
    namespace: str
    count: int
    setup: Result = field(default_factory=dict)
    deployments: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> uid, generation


def scenario(ctx: Context, contender: Contender, count: int) -> Result:
    """One contender's start on the world of ``count`` converged Foos (made on first use)."""
    world = ctx.worlds.get(count)
    if world is None:
        world = ctx.worlds[count] = _make_world(ctx, count)
    result: Result = {"count": count, **_start_once(ctx, world, contender)}
    if contender.name == SETUP or not ctx.worlds_reported.get(count):
        ctx.worlds_reported[count] = True
        result["setup"] = world.setup
    return result


def _make_world(ctx: Context, count: int) -> World:
    namespace = f"bench-{ctx.run_id}-restart-{count}"
    ctx.cluster.create_namespace(namespace, ctx.run_id)
    ctx.namespaces.append(namespace)
    ctx.cluster.ensure_pod_room(count + 100, POD_ROOM)
    world = World(namespace, count)
    setup = CONTENDERS[SETUP]
    cloned = ctx.settings.restart_world == "cloned" and count > cloning.TEMPLATES
    real = cloning.TEMPLATES if cloned else count
    names = [f"foo-{i:05d}" for i in range(count)]
    say(
        f"restart {count}: converging {real} Foos with {SETUP} first"
        + (f", then copying them into {count - real} more (--restart-world cloned)" if cloned else "")
    )
    op = Running.start(setup, ctx.tools, _watches(ctx, setup), namespace, f"restart-{count}-setup")
    available = Tracker(ctx.cluster, FOO, namespace, lambda obj: foo_available(obj) and successful(obj))
    try:
        op.wait_ready()
        _quiet(op, 5.0, 120.0)
        empty = _main_rss(op)
        available.start()
        cpu0, start = op.usage().cpu_seconds, time.monotonic()
        ctx.cluster.create_many(FOO, namespace, [foo_body(name) for name in names[:real]])
        deadline = start + ctx.settings.p2_timeout
        while len(available.snapshot()) < real:
            if time.monotonic() > deadline or not op.alive():
                raise RuntimeError(f"setup: only {len(available.snapshot())} of {real} Foos converged")
            time.sleep(1)
        converged = time.monotonic() - start
        _quiet(op, QUIET, 600.0)
        world.setup = {
            "world": "cloned" if cloned else "converged",
            "converged_foos": real,
            "converge_seconds": converged,
            "converge_cpu_seconds": op.usage().cpu_seconds - cpu0,
            "runs": op.runs(),
            "main_rss_empty_bytes": empty,
        }
        if cloned:
            available.stop()
            op.stop()
            start = time.monotonic()
            world.setup["clone"] = cloning.clone(
                ctx.cluster, namespace, _watches(ctx, setup), names[:real], names[real:], ctx.settings.p2_timeout
            )
            world.setup["clone_seconds"] = time.monotonic() - start
            op = Running.start(setup, ctx.tools, _watches(ctx, setup), namespace, f"restart-{count}-check")
            op.wait_ready(timeout=600)
            world.setup["check"] = _check_all(op, count, ctx.settings.p2_timeout)
        at_rest = _main_rss(op)
        world.setup |= {
            "main_rss_at_rest_bytes": at_rest,
            "bytes_per_foo_and_deployment": (at_rest - empty) / count,
            "tree_rss_at_rest_bytes": op.usage().rss_bytes,
            "pss_at_rest_bytes": op.pss_bytes(),
        }
        made = (
            f"{real} converged in {converged:.0f} s, {count - real} copied in {world.setup['clone_seconds']:.0f} s, "
            f"then all {count} skipped at a start of {SETUP}"
            if cloned
            else f"converged in {converged:.0f} s"
        )
        say(
            f"restart {count}: {made}; main process {empty / 2**20:.1f} -> "
            f"{at_rest / 2**20:.1f} MiB at rest ({world.setup['bytes_per_foo_and_deployment'] / 1024:.1f} KiB "
            "per Foo and its Deployment)"
        )
    finally:
        available.stop()
        op.stop()
    world.deployments = _deployment_versions(ctx, namespace)
    return world


def _check_all(op: Running, count: int, timeout: float) -> Result:
    """A start of the setup contender on the copied world: every Foo must be checked and skipped (a copy
    that is not what a run leaves is drifted or unverified, and runs)."""
    deadline, last, since, reached = time.monotonic() + timeout, -1.0, time.monotonic(), None
    while time.monotonic() < deadline and op.alive():
        work, now = op.runs() + _checks(op), time.monotonic()
        if work != last:
            last, since = work, now
            reached = now if reached is None and work >= count else reached
        if reached is not None and _settled(now, since, reached):
            break
        time.sleep(0.5)
    checks = _checks_by_result(op) or {}
    result: Result = {"checks": checks, "runs": op.runs(), "done_seconds": since - op.started}
    if checks.get("skipped") != count:
        raise RuntimeError(f"setup: the copied world is not as runs leave it: start-up checks {checks} of {count}")
    return result


def _settled(now: float, last_change: float, done: float) -> bool:
    """At rest: the start-up work is done and nothing ran for QUIET seconds, or it was done SETTLE ago."""
    return now - last_change >= QUIET or now - done >= SETTLE


def _deployment_versions(ctx: Context, namespace: str) -> dict[str, tuple[str, int]]:
    """Each Deployment's uid and generation: what a run that changed it (or made it again) moves."""
    return {
        d["metadata"]["name"]: (d["metadata"]["uid"], d["metadata"].get("generation", 0))
        for d in cloning.deployments_of(ctx.cluster, namespace)
    }


def _start_once(ctx: Context, world: World, contender: Contender) -> Result:
    newcomer = f"new-{contender.slug}"
    op = Running.start(contender, ctx.tools, _watches(ctx, contender), world.namespace, f"restart-{world.count}")
    tracker = Tracker(ctx.cluster, FOO, world.namespace, successful)
    progress: list[tuple[float, float]] = []
    try:
        op.wait_ready(timeout=600)
        ready = time.monotonic() - op.started
        tracker.start()
        created = time.monotonic()
        ctx.cluster.create(FOO, world.namespace, foo_body(newcomer))
        first_run = newcomer_done = runs_before = done = None
        last_change, work, cpu = time.monotonic(), 0.0, 0.0
        deadline = time.monotonic() + ctx.settings.p2_timeout
        while time.monotonic() < deadline and op.alive():
            runs, checks = op.runs(), _checks(op)
            now = time.monotonic()
            if runs and first_run is None:
                first_run = now - op.started
            if newcomer_done is None and newcomer in tracker.snapshot():
                newcomer_done = tracker.snapshot()[newcomer] - created
                runs_before = max(0.0, runs - 1)  # the newcomer's own run is one of them
            if runs + checks != work:
                work, last_change = runs + checks, now
                progress.append((now - op.started, work))
                if done is None and work >= world.count:
                    done, cpu = now - op.started, op.usage().cpu_seconds
            if done is not None and newcomer_done is not None and _settled(now, last_change, op.started + done):
                break
            time.sleep(0.1)
        if done is None:
            cpu = op.usage().cpu_seconds
        at_rest = _main_rss(op)
        result: Result = {
            "ready_seconds": ready,
            "first_run_seconds": first_run,
            "startup_done_seconds": done,
            "last_change_seconds": last_change - op.started,
            "newcomer_seconds": newcomer_done,
            "runs_before_newcomer": runs_before,
            "runs": op.runs(),
            "startup_checks": _checks_by_result(op),
            "cpu_seconds": cpu,
            "main_rss_at_rest_bytes": at_rest,
            "tree_rss_at_rest_bytes": op.usage().rss_bytes,
            "progress": progress,
            "deployments_changed": _changed(world, _deployment_versions(ctx, world.namespace), newcomer),
        }
        if done is None:
            result["problem"] = f"the start-up work did not finish: {work:.0f} of {world.count} done"
        say(
            f"restart {world.count} {contender.name}: first run {_fmt(first_run)} s, start-up done {_fmt(done)} s, "
            f"new Foo {_fmt(newcomer_done)} s after {runs_before} runs, CPU {cpu:.0f} s, "
            f"main RSS {at_rest / 2**20:.1f} MiB, {result['deployments_changed']} Deployments changed"
        )
        return result
    finally:
        tracker.stop()
        op.stop()
        ctx.cluster.delete(FOO, world.namespace, newcomer)


def _changed(world: World, now: dict[str, tuple[str, int]], newcomer: str) -> int:
    """Deployments of the world a contender's start made again, changed or deleted (its newcomer's aside)."""
    return sum(1 for name, version in world.deployments.items() if now.get(name) != version) + sum(
        1 for name in now if name not in world.deployments and name != newcomer
    )


def _watches(ctx: Context, contender: Contender) -> Any:
    return watches_file(ctx.tools, (FOO,), contender.status_wake, skip=contender.skip_converged)


def _checks(op: Running) -> float:
    return metric_sum(op.metrics(), "hybrid_operator_startup_checks_total") if op.contender.side == "ours" else 0.0


def _checks_by_result(op: Running) -> dict[str, float] | None:
    if op.contender.side != "ours":
        return None
    text = op.metrics()
    return {result: _labelled(text, result) for result in ("skipped", "drifted", "unverified")}


def _labelled(text: str, result: str) -> float:
    return metric_sum(text, "hybrid_operator_startup_checks_total", lambda labels: f'result="{result}"' in labels)


def _quiet(op: Running, seconds: float, timeout: float) -> None:
    """Wait until no run started or ended for ``seconds``."""
    deadline, last, since = time.monotonic() + timeout, -1.0, time.monotonic()
    while time.monotonic() < deadline:
        runs = op.runs()
        if runs != last:
            last, since = runs, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return
        time.sleep(1)


def _main_rss(op: Running) -> int:
    """The main process's RSS, the median of five looks over ten seconds."""
    looks = []
    for _ in range(5):
        proc = procs.read(op.proc.pid)
        looks.append(proc.rss_bytes if proc else 0)
        time.sleep(2)
    return int(statistics.median(looks))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
