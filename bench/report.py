"""Turning results into what a person reads (a table on stdout) and what a machine keeps (JSON).

Every figure is shown per contender, followed by its ratio to the ``runner`` baseline and to the peer
(contender / reference): below 1.00x means less time, memory, CPU, requests or disk; for throughput,
above 1.00x is better. The JSON file holds everything, raw samples included, plus what the numbers
depend on: the machine, the cluster, the versions of everything measured.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import procs
from bench.cluster import bed_run_dir
from bench.contenders import BASELINE, PEER

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
Result = dict[str, Any]
MiB = 1 << 20


# ---------------------------------------------------------------------------------------- machine


def _first(path: str, prefix: str) -> str:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def _dist(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _commit() -> str:
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        )
    except OSError:
        return "?"
    return proc.stdout.strip() or "?"


def python_build() -> str:
    """How this interpreter (the one every contender's Python runs on) was compiled: what makes the same
    Python version about a tenth faster or slower on a run (hack/build-python.sh)."""
    args = str(sysconfig.get_config_var("CONFIG_ARGS") or "")
    parts = [
        "profile-guided" if "--enable-optimizations" in args else "no profile-guided optimization",
        "link-time optimized" if "--with-lto" in args else "no link-time optimization",
        "shared libpython" if sysconfig.get_config_var("Py_ENABLE_SHARED") else "libpython linked in",
    ]
    return ", ".join(parts)


def controller_qps(kubeconfig: str, proc: str | Path = "/proc") -> int | None:
    """The ``--kube-api-qps`` of the local test bed's kube-controller-manager (``hack/local-cluster.sh``
    keeps its pid beside the kubeconfig it prints), or None for another cluster: it sets how fast the bed
    alone makes Deployments available, P2's floor (``python -m bench.floor``)."""
    try:
        pid = int((bed_run_dir(kubeconfig) / "kube-controller-manager.pid").read_text())
    except (OSError, ValueError):
        return None
    argv = procs.cmdline(pid, proc)
    if not argv or not argv[0].endswith("kube-controller-manager"):
        return None
    for at, flag in enumerate(argv):
        value = argv[at + 1] if flag == "--kube-api-qps" and at + 1 < len(argv) else None
        value = flag.partition("=")[2] if flag.startswith("--kube-api-qps=") else value
        if value is not None:
            try:
                return int(float(value))
            except ValueError:
                return None
    return 20  # kube-controller-manager's own default


def file_create_us(directory: Path, count: int = 200) -> float:
    """The median microseconds to create (and close) one empty file in a new dir under ``directory``, the
    files removed again: on a disk that skips recently freed inodes (ext4 without a journal) it grows for
    minutes after many files were deleted, and a run's latency with it (docs/internals/performance.md, "A run's
    files, and the disk under them")."""
    probe = Path(tempfile.mkdtemp(prefix="file-create-", dir=directory))
    times = []
    try:
        for i in range(count):
            started = time.perf_counter()
            os.close(os.open(probe / str(i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            times.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    return round(statistics.median(times) * 1e6, 1)


def machine(server_version: str, kubeconfig: str = "", work: Path | None = None) -> Result:
    return {
        "cpu_model": _first("/proc/cpuinfo", "model name"),
        "cores": os.cpu_count(),
        "memory_bytes": int(_first("/proc/meminfo", "MemTotal").split()[0]) * 1024,
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "python_build": python_build(),
        "ansible_core": _dist("ansible-core"),
        "ansible_runner": _dist("ansible-runner"),
        "ansible_collections_package": _dist("ansible"),
        "kubernetes_server": server_version,
        "bed_controller_qps": controller_qps(kubeconfig) if kubeconfig else None,
        "load_average_at_start": list(os.getloadavg()),
        "file_create_us_at_start": file_create_us(work) if work is not None else None,
        "hybrid_operator_commit": _commit(),
    }


# ------------------------------------------------------------------------------------------ table


@dataclass(frozen=True)
class Row:
    label: str
    get: Callable[[Result], float | None]
    fmt: Callable[[float], str]
    ratios: bool = True


def _secs(v: float) -> str:
    return f"{v:.2f} s" if v < 100 else f"{v:.0f} s"


def _rate(v: float) -> str:
    return f"{v:.2f}/s"


def _mib(v: float) -> str:
    return f"{v / MiB:.1f} MiB"


def _count(v: float) -> str:
    return f"{v:,.0f}"


def _key(*path: str) -> Callable[[Result], float | None]:
    def get(result: Result) -> float | None:
        value: Any = result
        for part in path:
            if not isinstance(value, dict):
                return None
            value = value.get(part)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    return get


def _block(title: str, contenders: list[str], results: dict[str, Result], rows: list[Row]) -> list[str]:
    width = max(14, *(len(c) + 2 for c in contenders))
    lines = [title, " " * 26 + "".join(f"{c:>{width}}" for c in contenders)]
    for row in rows:
        values = {c: (row.get(results[c]) if c in results else None) for c in contenders}
        lines.append(
            f"  {row.label:<24}" + "".join(f"{_cell(values[c], row.fmt, results, c):>{width}}" for c in contenders)
        )
        if not row.ratios:
            continue
        for ref in (BASELINE, PEER):
            base = values.get(ref)
            if ref not in contenders or base is None or base <= 0:
                continue  # no ratio to a missing, zero or (noise-)negative reference
            cells = []
            for c in contenders:
                v = values[c]
                cells.append(f"{v / base:.2f}x" if v is not None and v >= 0 else "-")
            lines.append(f"  {'  vs ' + ref:<24}" + "".join(f"{cell:>{width}}" for cell in cells))
    return lines


def _cell(value: float | None, fmt: Callable[[float], str], results: dict[str, Result], contender: str) -> str:
    if contender not in results:
        return "-"
    if "error" in results[contender]:
        return "error"
    return "-" if value is None else fmt(value)


def _qps(machine: Result) -> str:
    qps = machine.get("bed_controller_qps")
    return f" (the bed's controller manager at {qps} requests/s)" if qps else ""


def _file_create(machine: Result) -> str:
    us = machine.get("file_create_us_at_start")
    return f", a file created in {us:.0f} us" if us is not None else ""


def table(run: Result) -> str:
    contenders: list[str] = run["contenders_run"]
    scen: Result = run["scenarios"]
    host = run["machine"]
    out = [
        f"hybrid-operator bench {run['id']}  ({run['started']}, {host['cores']} cores {host['cpu_model']}, "
        f"load {host['load_average_at_start'][0]:.1f}{_file_create(host)} at start, "
        f"Kubernetes {host['kubernetes_server']}{_qps(host)}, Python {host['python']}: "
        f"{host.get('python_build', '?')})",
        "ratios: contender / reference; below 1.00x is less time, memory, CPU, requests or disk "
        "(throughput: above 1.00x is better)",
    ]
    for name, info in run["contenders"].items():
        out.append(
            f"  {name:<18} {info.get('version', '')}" + (f"  SKIPPED: {info['skipped']}" if info.get("skipped") else "")
        )
    if "p1" in scen:
        for role, res in scen["p1"].items():
            n = max((r.get("n", 0) for r in res.values()), default=0)
            rows = [Row("median", _key("median"), _secs), Row("p90", _key("p90"), _secs)]
            rows.append(Row("warm-up (first object)", _key("warmup"), _secs, ratios=False))
            title = f"P1 {role}: create -> Successful=True, one object at a time (n={n} after 1 warm-up)"
            out += ["", *_block(title, contenders, res, rows)]
    if "p2" in scen:
        for count, res in scen["p2"].items():
            rows = [
                Row("all converged", _key("seconds"), _secs),
                Row("throughput", _key("throughput"), _rate),
                Row("all reconciled once", _key("all_reconciled_seconds"), _secs, ratios=False),
                Row("converged (count)", _key("converged"), _count, ratios=False),
                Row("CPU (process tree)", _key("cpu_seconds"), _secs),
                Row("test bed CPU meanwhile", _key("bed_cpu_seconds"), _secs, ratios=False),
                Row("peak RSS", _key("peak_rss_bytes"), _mib),
                Row("runs", _key("runs"), _count, ratios=False),
            ]
            title = f"P2 {count} Foos at once -> every Foo availableReplicas == spec.replicas (replicas 1-3)"
            out += ["", *_block(title, contenders, res, rows)]
    if "p3" in scen:
        res = scen["p3"]
        base = run.get("p3_baseline") or {}
        rows = [
            Row("RSS (tree, idle)", _key("rss_bytes"), _mib),
            Row("PSS (tree, idle)", _key("pss_bytes"), _mib),
            Row("processes", _key("processes"), _count, ratios=False),
            Row("idle CPU", _key("idle_cpu_seconds"), _secs),
            Row("API requests, kind", _key("apiserver_requests_kind"), _count),
            Row("API requests, all", _key("apiserver_requests"), _count),
            Row("API requests, client", _key("client_requests"), _count, ratios=False),
            Row("converge all", _key("converge_seconds"), _secs),
            Row("converge CPU", _key("converge_cpu_seconds"), _secs),
        ]
        objects = next((r.get("objects") for r in res.values() if "objects" in r), "?")
        idle = next((r.get("idle_seconds") for r in res.values() if "idle_seconds" in r), 0)
        title = f"P3 {objects} trivial objects, then {idle:.0f} s idle"
        out += ["", *_block(title, contenders, res, rows)]
        out += [
            "  API requests, kind: the API server's apiserver_request_total on the watched kind's group over the "
            "window (only the operator touches it then)",
            "  API requests, all: apiserver_request_total over the window minus the same with no operator running "
            f"({base.get('apiserver_requests', 0):.0f} in {base.get('seconds', 0):.0f} s): includes discovery, "
            "events; noisy",
            "  API requests, client: the peer's own rest_client_requests_total (ours exports no such counter)",
            "  the API server counts a watch when it ends: one still open at the end of the window is not counted",
        ]
    if "p4" in scen:
        res = scen["p4"]
        rows = [
            Row("runs done", _key("runs"), _count, ratios=False),
            Row("artifacts on disk", _key("bytes"), _mib),
            Row("  allocated", _key("allocated_bytes"), _mib, ratios=False),
            Row("files", _key("files"), _count),
            Row("runs/s (1s period)", _key("runs_per_second"), _rate),
            Row("CPU per run", _key("cpu_per_run"), _secs),
        ]
        target = next((r.get("target_runs") for r in res.values() if "target_runs" in r), "?")
        objects = next((r.get("objects") for r in res.values() if "objects" in r), "?")
        title = f"P4 artifacts after {target} runs ({objects} objects at reconcile-period 1s)"
        out += ["", *_block(title, contenders, res, rows)]
        out.append("  runs are counted before SIGTERM; the runs in flight then (at most one per worker) finish too")
    for name in ("heavy", "kiali"):
        out += _workload_block(name, scen.get(name), contenders)
    out += [
        line for count, res in (scen.get("restart") or {}).items() for line in _restart_block(count, res, contenders)
    ]
    errors = [
        f"  {s} {c}: {r.get('error') or r.get('problem')}"
        for s, by in _flat(scen)
        for c, r in by.items()
        if isinstance(r, dict) and ("error" in r or "problem" in r)
    ]
    if errors:
        out += ["", "errors and problems:", *errors]
    out += ["", *(f"note: {n}" for n in run.get("notes", []))]
    return "\n".join(out)


def _workload_block(name: str, res: Result | None, contenders: list[str]) -> list[str]:
    """The heavy or kiali scenario (``workloads``): per phase, the median latency and CPU of the tree."""
    if not res:
        return []
    if "skipped" in res:
        return ["", f"{name}: skipped ({res['skipped']})"]
    rows = [
        Row("first reconcile", _key("create", "median"), _secs),
        Row("  CPU (tree)", _key("create", "cpu_seconds"), _secs),
        Row("  task results", _key("tasks"), _count, ratios=False),
        Row("  CPU per task", _key("cpu_per_task"), lambda v: f"{v * 1000:.1f} ms"),
        Row("spec change", _key("change", "median"), _secs),
        Row("  CPU (tree)", _key("change", "cpu_seconds"), _secs),
        Row("delete (finalizer)", _key("delete", "median"), _secs),
        Row("  CPU (tree)", _key("delete", "cpu_seconds"), _secs),
    ]
    rounds = max((len((r.get("create") or {}).get("samples") or []) for r in res.values()), default=0)
    what = "bench/projects/heavy (~200 tasks, 20 objects)" if name == "heavy" else "Kiali's operator"
    title = f"{name}: {what}, one object at a time, median of {rounds} rounds after a warm-up round"
    return ["", *_block(title, contenders, res, rows)]


def _restart_block(count: str, res: Result, contenders: list[str]) -> list[str]:
    """The restart scenario: the world's setup (once), then each contender's start on it."""
    rows = [
        Row("ready (/readyz)", _key("ready_seconds"), _secs),
        Row("first run", _key("first_run_seconds"), _secs),
        Row("start-up work done", _key("startup_done_seconds"), _secs),
        Row("new Foo -> Successful", _key("newcomer_seconds"), _secs),
        Row("  runs before it", _key("runs_before_newcomer"), _count, ratios=False),
        Row("runs", _key("runs"), _count, ratios=False),
        Row("  skipped (checked)", _key("startup_checks", "skipped"), _count, ratios=False),
        Row("  drifted (run)", _key("startup_checks", "drifted"), _count, ratios=False),
        Row("Deployments it changed", _key("deployments_changed"), _count, ratios=False),
        Row("CPU until done (tree)", _key("cpu_seconds"), _secs),
        Row("main RSS at rest", _key("main_rss_at_rest_bytes"), _mib),
        Row("tree RSS at rest", _key("tree_rss_at_rest_bytes"), _mib),
    ]
    lines = [
        "",
        *_block(
            f"restart: {count} converged Foos (and their Deployments) exist, the operator starts", contenders, res, rows
        ),
    ]
    setup = next((r["setup"] for r in res.values() if isinstance(r, dict) and r.get("setup")), None)
    if setup:
        real = setup.get("converged_foos", count)
        made = f"{real} Foos converged in {setup['converge_seconds']:.0f} s ({setup['runs']:.0f} runs)"
        if setup.get("world") == "cloned":
            made += f", {int(count) - int(real)} copied from them in {setup['clone_seconds']:.0f} s"
        lines.append(
            f"  setup (ours, once): {made}; main process RSS {_mib(setup['main_rss_empty_bytes'])} empty, "
            f"{_mib(setup['main_rss_at_rest_bytes'])} at rest: "
            f"{setup['bytes_per_foo_and_deployment'] / 1024:.1f} KiB per Foo and its Deployment"
        )
    return lines


def _flat(scen: Result) -> list[tuple[str, dict[str, Any]]]:
    flat: list[tuple[str, dict[str, Any]]] = []
    for name, value in scen.items():
        if name in ("p1", "p2", "restart"):
            flat += [(f"{name} {sub}", by) for sub, by in value.items()]
        else:
            flat.append((name, value))
    return flat


# ------------------------------------------------------------------------------------------- JSON


def write_json(run: Result, directory: Path = RESULTS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = directory / f"{stamp}-{run['id']}.json"
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(run, indent=2, sort_keys=False) + "\n")
    partial.rename(path)
    return path
