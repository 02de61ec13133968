"""Heavy reconciles, ours against the peer: the synthetic heavy role, and Kiali's operator from a checkout.

- ``heavy``: ``projects/heavy`` (a role of ~200 tasks shaped like real operators', 20 objects applied; CRD
  ``crds/heavy.yaml``). Per round a new Heavy: create -> ``Successful`` (its first reconcile), then a spec
  change -> reconciled again, then delete -> gone. One warm-up round first, not counted.
- ``kiali``: Kiali's operator (its ``watches-k8s.yaml`` Kiali entry, playbooks and roles, its CRD), run from
  a checkout the bench is pointed at with ``--kiali PATH``; without one the scenario says so and is skipped.
  Nothing of Kiali is part of this repository. Both sides get ``ANSIBLE_ALLOW_BROKEN_CONDITIONALS=true``
  (Kiali's roles have conditionals ansible-core 2.19 refuses) and ``ANSIBLE_ROLES_PATH`` at its roles.
  The delete runs its finalizer (``kiali-remove``).

For each phase: the median (and all samples) of the latency, of the CPU of the operator's process tree,
and, for the first reconcile, the task results of the run (from its job events) and CPU per task.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bench.cluster import Kind, Obj, Tracker, successful
from bench.contenders import Contender, Running
from bench.scenarios import ROOT, Context, Result, say, summary

HEAVY = Kind("bench.hybrid-operator.dev", "v1alpha1", "heavies", "Heavy")
KIALI = Kind("kiali.io", "v1alpha1", "kialis", "Kiali")
TASK_EVENTS = ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable")


@dataclass(frozen=True)
class Workload:
    name: str
    kind: Kind
    crd: Path
    entry: str  # the watches.yaml entry (absolute paths), for both sides
    body: Callable[[str, str], Obj]  # (name, namespace) -> the object to create
    change: Obj  # a merge patch of its spec
    env: dict[str, str] = field(default_factory=dict)


def heavy() -> Workload:
    role = ROOT / "bench" / "projects" / "heavy" / "roles" / "heavy"
    entry = f"- version: {HEAVY.version}\n  group: {HEAVY.group}\n  kind: {HEAVY.kind}\n  role: {role}\n"

    def body(name: str, _namespace: str) -> Obj:
        spec = {"version": "v1.2", "deployment": {"replicas": 1}}
        return {"apiVersion": HEAVY.api_version, "kind": HEAVY.kind, "metadata": {"name": name}, "spec": spec}

    change = {"spec": {"deployment": {"logger": {"log_level": "debug"}}}}
    return Workload("heavy", HEAVY, ROOT / "bench" / "crds" / "heavy.yaml", entry, body, change)


def kiali(checkout: Path) -> Workload:
    """Kiali's operator from ``checkout`` (raises FileNotFoundError, naming what is missing)."""
    watches, crd = checkout / "watches-k8s.yaml", checkout / "crd-docs" / "crd" / "kiali.io_kialis.yaml"
    for needed in (watches, crd, checkout / "roles", checkout / "playbooks"):
        if not needed.exists():
            raise FileNotFoundError(f"{needed} (is {checkout} a checkout of kiali-operator?)")
    entries = yaml.safe_load(watches.read_text(encoding="utf-8"))
    entry = next(e for e in entries if e.get("kind") == KIALI.kind)
    entry["playbook"] = str(checkout / entry["playbook"])
    if isinstance(entry.get("finalizer"), dict) and entry["finalizer"].get("playbook"):
        entry["finalizer"]["playbook"] = str(checkout / entry["finalizer"]["playbook"])

    # The newest versioned role: the default one takes its image version from the operator's own pod.
    versions = sorted((p.name for p in (checkout / "roles").glob("v*.*")), key=_version_key)
    if not versions:
        raise FileNotFoundError(f"{checkout / 'roles'}/vX.Y (is {checkout} a checkout of kiali-operator?)")

    def body(name: str, namespace: str) -> Obj:
        spec = {
            "version": versions[-1],
            "istio_namespace": namespace,
            "auth": {"strategy": "anonymous"},
            "deployment": {"cluster_wide_access": False, "discovery_selectors": {"default": []}},
            "external_services": {
                "grafana": {"enabled": False},
                "tracing": {"enabled": False},
                "prometheus": {"url": "http://prometheus.invalid:9090"},
            },
        }
        return {"apiVersion": KIALI.api_version, "kind": KIALI.kind, "metadata": {"name": name}, "spec": spec}

    env = {"ANSIBLE_ALLOW_BROKEN_CONDITIONALS": "true", "ANSIBLE_ROLES_PATH": str(checkout / "roles")}
    change = {"spec": {"deployment": {"logger": {"log_level": "debug"}}}}
    return Workload("kiali", KIALI, crd, yaml.safe_dump([entry], sort_keys=False), body, change, env)


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.lstrip("v").split(".") if part.isdigit())


# ------------------------------------------------------------------------------------------ running


@contextlib.contextmanager
def _operator(ctx: Context, contender: Contender, workload: Workload) -> Iterator[Running]:
    namespace = f"bench-{ctx.run_id}-{contender.slug}-{workload.name}"
    ctx.cluster.create_namespace(namespace, ctx.run_id)
    ctx.namespaces.append(namespace)
    watches = ctx.tools.work / f"watches-{workload.name}.yaml"
    watches.write_text("---\n" + workload.entry, encoding="utf-8")
    running = Running.start(contender, ctx.tools, watches, namespace, f"{contender.slug}-{workload.name}", workload.env)
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()
        for directory in running.artifact_dirs():
            ctx.discard(directory)
        if not ctx.cluster.delete_namespaces([namespace], ctx.settings.namespace_timeout):
            ctx.namespaces.remove(namespace)


def _completion(obj: Obj) -> str:
    """When the object's last run ended, as both operators write it (``ansibleResult`` of the Running
    condition, operator-sdk's layout)."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and isinstance(cond.get("ansibleResult"), dict):
            return str(cond["ansibleResult"].get("completion") or "")
    return ""


def _phase(
    ctx: Context, op: Running, kind: Kind, act: Callable[[], object], done: Callable[[Obj], bool], name: str
) -> tuple[float | None, float, str | None]:
    """Do ``act`` and wait until ``name`` meets ``done``: (seconds or None, CPU seconds, why not)."""
    tracker = Tracker(ctx.cluster, kind, op.namespace, done)
    seen, cpu = _timed(ctx, op, tracker, act, lambda: tracker.wait_for(name, ctx.settings.p1_timeout * 5))
    if seen is None:
        return None, cpu, tracker.failed.get(name) or "timed out"
    return seen, cpu, None


def _gone(
    ctx: Context, op: Running, kind: Kind, act: Callable[[], object], name: str
) -> tuple[float | None, float, str | None]:
    """Do ``act`` and wait until ``name`` is deleted: (seconds or None, CPU seconds, why not)."""
    tracker = Tracker(ctx.cluster, kind, op.namespace, lambda _obj: False)
    seen, cpu = _timed(ctx, op, tracker, act, lambda: tracker.wait_gone(name, ctx.settings.p1_timeout * 5))
    return (None, cpu, "still there") if seen is None else (seen, cpu, None)


def _timed(
    ctx: Context, op: Running, tracker: Tracker, act: Callable[[], object], wait: Callable[[], float | None]
) -> tuple[float | None, float]:
    """``act``, then ``wait`` on the started ``tracker``: (seconds from ``act`` to the event, or None; CPU)."""
    tracker.start()
    try:
        cpu0, start = op.usage().cpu_seconds, time.monotonic()
        act()
        seen = wait()
        cpu = op.usage().cpu_seconds - cpu0
    finally:
        tracker.stop()
    return (None if seen is None else seen - start), cpu


def _tasks_of_last_run(op: Running, name: str) -> int | None:
    """Task results in the newest run of object ``name`` that the contender's artifacts hold."""
    runs: list[Path] = []
    for root in op.artifact_dirs():
        runs += [p for p in root.glob("**/job_events") if f"/{name}/" in str(p)]
    if not runs:
        return None
    newest = max(runs, key=lambda p: p.stat().st_mtime)
    count = 0
    for event_file in newest.glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            count += json.loads(event_file.read_text(encoding="utf-8")).get("event") in TASK_EVENTS
    return count


def run(ctx: Context, contender: Contender, workload: Workload) -> Result:
    rounds = ctx.settings.heavy_rounds
    ctx.cluster.ensure_crds([workload.crd])
    phases: dict[str, dict[str, list[float]]] = {p: {"seconds": [], "cpu": []} for p in ("create", "change", "delete")}
    tasks: list[int] = []
    problems: list[str] = []
    with _operator(ctx, contender, workload) as op:
        for i in range(rounds + 1):  # round 0 warms up
            name = f"{workload.name}-{i:03d}"
            body = workload.body(name, op.namespace)
            create = functools.partial(ctx.cluster.create, workload.kind, op.namespace, body)
            seconds, cpu, why = _phase(ctx, op, workload.kind, create, successful, name)
            if why is None:
                if i > 0:
                    phases["create"]["seconds"].append(seconds or 0.0)
                    phases["create"]["cpu"].append(cpu)
                    if (count := _tasks_of_last_run(op, name)) is not None:
                        tasks.append(count)
                _change_and_delete(ctx, op, workload, name, phases, problems, counted=i > 0)
            else:
                problems.append(f"{name} create: {why}")
            if problems:
                say(f"{workload.name} {contender.name}: {problems[-1]}")
                break
            say(f"{workload.name} {contender.name}: round {i} create {_fmt(seconds)} s")
    return _result(phases, tasks, problems)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _change_and_delete(
    ctx: Context,
    op: Running,
    workload: Workload,
    name: str,
    phases: dict[str, dict[str, list[float]]],
    problems: list[str],
    counted: bool,
) -> None:
    before = _quiesce(ctx, workload.kind, op.namespace, name)
    steps = [
        (
            "change",
            lambda: ctx.cluster.patch(workload.kind, op.namespace, name, workload.change),
            lambda obj: successful(obj) and _completion(obj) not in ("", before),
        ),
        ("delete", lambda: ctx.cluster.delete(workload.kind, op.namespace, name), None),
    ]
    for phase, act, done in steps:
        if done is None:
            seconds, cpu, why = _gone(ctx, op, workload.kind, act, name)
        else:
            seconds, cpu, why = _phase(ctx, op, workload.kind, act, done, name)
        if why is not None:
            problems.append(f"{name} {phase}: {why}")
            return
        if counted:
            phases[phase]["seconds"].append(seconds or 0.0)
            phases[phase]["cpu"].append(cpu)
        if phase == "change":
            _quiesce(ctx, workload.kind, op.namespace, name)


def _quiesce(ctx: Context, kind: Kind, namespace: str, name: str, limit: float = 120) -> str:
    """Wait until the object's last run's completion stamp has stayed the same for ``settle`` seconds (the
    reconciles its own children's creation set off are over); that stamp."""
    deadline = time.monotonic() + limit
    stamp, since = _completion(ctx.cluster.get(kind, namespace, name)), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < ctx.settings.settle:
        time.sleep(0.5)
        now = _completion(ctx.cluster.get(kind, namespace, name))
        if now != stamp:
            stamp, since = now, time.monotonic()
    return stamp


def _result(phases: dict[str, dict[str, list[float]]], tasks: list[int], problems: list[str]) -> Result:
    out: Result = {}
    for phase, samples in phases.items():
        out[phase] = {**summary(samples["seconds"]), "samples": samples["seconds"], "cpu_samples": samples["cpu"]}
        out[phase]["cpu_seconds"] = summary(samples["cpu"])["median"]
    tasks_median = summary([float(t) for t in tasks])["median"]
    out["tasks"] = tasks_median
    cpu = out["create"]["cpu_seconds"]
    out["cpu_per_task"] = cpu / tasks_median if cpu is not None and tasks_median else None
    if problems:
        out["problem"] = problems[0][:300]
    return out


def scenario(ctx: Context, contender: Contender, which: str, kiali_path: Path | None) -> Result:
    """The ``heavy`` or ``kiali`` scenario for one contender."""
    if which == "heavy":
        return run(ctx, contender, heavy())
    if kiali_path is None:
        return {"skipped": "no Kiali operator checkout: give --kiali PATH (a clone of kiali/kiali-operator)"}
    return run(ctx, contender, kiali(kiali_path.resolve()))
