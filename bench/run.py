"""Entry point: ``python -m bench`` or ``python bench/run.py``. Parses flags, runs, reports, cleans up.

    python -m bench --quick                                   # a few minutes per contender
    python -m bench --contenders runner,warm,peer --p1 30 --p2 200 --p3 5000 --p4-runs 10000
    python -m bench --scenarios p1,p2 --p2 200,1000           # P2 at two sizes
    python -m bench --scenarios heavy --contenders warm,peer --plot   # the heavy role, with pictures
    python -m bench --scenarios kiali --kiali ~/src/kiali-operator    # Kiali's operator from a checkout
    python -m bench --scenarios restart --restart 1000 --contenders warm-skip,warm,peer   # N Foos exist, start
    python -m bench --cleanup                                 # delete namespaces an interrupted run left

The cluster is $KUBECONFIG (or --kubeconfig), else the local test bed (``hack/local-cluster.sh up``;
set LOCAL_CLUSTER_NAME=bench to give the benchmark a test bed of its own, away from running tests).
Scenarios run one after the other and, within each, contenders one after the other, each started fresh
in its own namespace: nothing runs side by side, so every figure is one contender alone on the machine
(plus whatever else the machine is doing: the load average is recorded).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.contenders import Contender, Tools
    from bench.scenarios import Context

ROOT = Path(__file__).resolve().parent.parent

SCENARIOS = ("p1", "p2", "p3", "p4", "heavy", "kiali", "restart")
DEFAULT_SCENARIOS = ("p1", "p2", "p3", "p4")
FULL = {"p1": 30, "p2": "200", "p3": 5000, "p3_idle": 60.0, "p4_runs": 10000}
QUICK = {"p1": 5, "p2": "20", "p3": 200, "p3_idle": 30.0, "p4_runs": 200}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark hybrid-operator's executors against operator-sdk's ansible-operator. "
        "Prints numbers; never passes or fails.",
    )
    a = p.add_argument
    a("--contenders", default="runner,runner+modserver,warm,peer", help="comma-separated, in column order")
    a("--scenarios", default=",".join(DEFAULT_SCENARIOS), help=f"comma-separated, of {','.join(SCENARIOS)}")
    a("--quick", action="store_true", help="P1 n=5, P2 20, P3 200 (30 s idle), P4 200 runs")
    a("--p1", type=int, help=f"P1 samples per role (default {FULL['p1']})")
    a("--p2", help=f"P2 Foos created at once; several sizes comma-separated, e.g. 200,1000 (default {FULL['p2']})")
    a("--p3", type=int, help=f"P3 trivial objects (default {FULL['p3']})")
    a("--p3-idle", type=float, help=f"P3 idle window in seconds (default {FULL['p3_idle']:.0f})")
    a("--p4-runs", type=int, help=f"P4 runs before the artifacts are measured (default {FULL['p4_runs']})")
    a("--p4-objects", type=int, default=10, help="P4 objects reconciled every second (default 10)")
    a("--heavy", type=int, default=5, help="heavy and kiali: rounds (create, change, delete) after a warm-up")
    a(
        "--restart",
        default="1000",
        help="restart: converged Foos the contenders start on; several sizes comma-separated (default 1000)",
    )
    a(
        "--restart-world",
        choices=("cloned", "converged"),
        default="cloned",
        help="restart: converge 20 Foos with our operator and copy them (cloned, the default), or run every "
        "one (converged: 801 s per 1,000 on 2 cores)",
    )
    a("--kiali", type=Path, help="kiali: a checkout of kiali/kiali-operator (the scenario is skipped without)")
    a("--plot", action="store_true", help="also write PNGs next to the JSON (matplotlib)")
    a("--p1-timeout", type=float, default=120, help="seconds to wait for one P1 object")
    a("--p2-timeout", type=float, default=1800, help="seconds to wait for a P2 burst to converge")
    a("--p3-timeout", type=float, default=7200, help="seconds to wait for all P3 objects")
    a("--p4-timeout", type=float, default=7200, help="seconds to wait for the P4 runs")
    a("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="default: $KUBECONFIG, else the local test bed")
    a("--peer-binary", default=os.environ.get("ANSIBLE_OPERATOR_BIN"), help="default: bench/build-peer.sh")
    a(
        "--peer-gather-facts",
        action="store_true",
        help="let the peer gather facts before each role run (its default); by default it runs with "
        "ANSIBLE_GATHERING=explicit, as our operator never gathers facts unasked",
    )
    a(
        "--peer-collections",
        type=Path,
        help="ANSIBLE_COLLECTIONS_PATH for the peer (default: the collections shipped in hybrid_operator)",
    )
    a("--results-dir", type=Path, default=ROOT / "bench" / "results", help="where the JSON file goes")
    a("--keep-work", action="store_true", help="keep operator logs and watches files (path printed at the end)")
    a("--cleanup", action="store_true", help="only delete namespaces left by earlier bench runs, then exit")
    return p


def _settings(args: argparse.Namespace) -> Any:
    from bench.scenarios import Settings

    preset = QUICK if args.quick else FULL

    def pick(name: str) -> Any:
        value = getattr(args, name)
        return preset[name] if value is None else value

    sizes = tuple(int(s) for s in str(pick("p2")).split(",") if s.strip())
    return Settings(
        p1=pick("p1"),
        p2=sizes,
        p3=pick("p3"),
        p3_idle=float(pick("p3_idle")),
        p4_runs=pick("p4_runs"),
        p4_objects=args.p4_objects,
        p1_timeout=args.p1_timeout,
        p2_timeout=args.p2_timeout,
        p3_timeout=args.p3_timeout,
        p4_timeout=args.p4_timeout,
        heavy_rounds=args.heavy,
        restart=tuple(int(s) for s in str(args.restart).split(",") if s.strip()),
        restart_world=args.restart_world,
    )


def _kubeconfig(explicit: str | None) -> str:
    if explicit:
        return explicit
    proc = subprocess.run([str(ROOT / "hack" / "local-cluster.sh"), "up"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"the local test bed did not come up:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    if __package__ in (None, ""):  # run as a script: import the package `bench`, not its files one by one
        if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
            del sys.path[0]
        sys.path.append(str(ROOT))  # last: the repo's operator.py must never shadow the standard library
    from bench import report
    from bench.cluster import Cluster
    from bench.scenarios import Context, say

    args = build_parser().parse_args(argv)
    kubeconfig = _kubeconfig(args.kubeconfig)
    cluster = Cluster(kubeconfig)
    if args.cleanup:
        left = cluster.bench_namespaces()
        say(f"deleting {len(left)} namespaces: {' '.join(left)}")
        return 1 if cluster.delete_namespaces(left, 600) else 0

    settings = _settings(args)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    wanted = [c.strip() for c in args.contenders.split(",") if c.strip()]
    _check_names(wanted, scenarios)
    signal.signal(signal.SIGTERM, _interrupt)
    run_id = uuid.uuid4().hex[:6]
    work = Path(tempfile.mkdtemp(prefix=f"hybrid-operator-bench-{run_id}-"))
    tools, info = _resolve(wanted, kubeconfig, work, args)
    active = [c for c in wanted if not info[c].get("skipped")]
    ctx = Context(cluster=cluster, tools=tools, settings=settings, run_id=run_id)
    cluster.ensure_crds([ROOT / "bench" / "crds" / "trivial.yaml", ROOT / "deploy" / "crds" / "foo.yaml"])
    run: dict[str, Any] = {
        "schema": 1,
        "id": run_id,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": _public_argv(sys.argv[1:] if argv is None else argv),
        "settings": dict(vars(settings)),
        "machine": report.machine(cluster.server_version(), kubeconfig, work),
        "contenders": info,
        "contenders_run": active,
        "scenarios": {},
        "notes": _notes(args),
    }
    say(f"run {run_id}: scenarios {','.join(scenarios)}; contenders {','.join(active)}; work dir {work}")
    if "kiali" in scenarios and args.kiali is None:
        say("kiali: skipped, no checkout of kiali/kiali-operator given (--kiali PATH)")
        run["scenarios"]["kiali"] = {"skipped": "no --kiali checkout given"}
        scenarios.remove("kiali")
    try:
        _run_all(ctx, run, scenarios, active, args.kiali)
    except KeyboardInterrupt:
        run["interrupted"] = True
        say("interrupted: stopping and cleaning up")
    finally:
        run["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        run["machine"]["load_average_at_end"] = list(os.getloadavg())
        ctx.remove_discarded()
        left = cluster.delete_namespaces(list(ctx.namespaces), 300) if ctx.namespaces else []
        if left:
            say(f"still terminating: {' '.join(left)} (python -m bench --cleanup)")
        if args.keep_work:
            say(f"logs and watches files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(report.table(run))
    path = report.write_json(run, args.results_dir)
    say(f"results: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if args.plot:
        from bench import plots

        for written in plots.write(run, path):
            say(f"plot: {written.relative_to(ROOT) if written.is_relative_to(ROOT) else written}")
    return 130 if run.get("interrupted") else 0


def _public_argv(argv: list[str]) -> list[str]:
    """The command line as the results keep it: paths of this machine (a checkout, a binary) left out."""
    private = {"--kiali", "--peer-binary", "--kubeconfig", "--results-dir", "--peer-collections"}
    out, hide = [], False
    for arg in argv:
        name = arg.split("=", 1)[0]
        if hide:
            out.append("PATH")
        elif name in private and "=" in arg:
            out.append(f"{name}=PATH")
        else:
            out.append(arg)
        hide = arg in private
    return out


def _check_names(contenders: list[str], scenarios: list[str]) -> None:
    from bench.contenders import CONTENDERS

    bad = [c for c in contenders if c not in CONTENDERS] + [s for s in scenarios if s not in SCENARIOS]
    if bad:
        raise SystemExit(
            f"unknown: {', '.join(bad)}; contenders are {', '.join(CONTENDERS)}, scenarios {', '.join(SCENARIOS)}"
        )


def _resolve(
    wanted: list[str], kubeconfig: str, work: Path, args: argparse.Namespace
) -> tuple[Tools, dict[str, dict[str, str]]]:
    """Versions and binaries of the contenders; a contender that cannot run says why and is skipped."""
    from bench import peer, report
    from bench.contenders import CONTENDERS, PEER, Tools, warm_import_problem
    from bench.scenarios import say

    ours = Path(sys.executable).parent / "hybrid-operator"
    proc = subprocess.run([str(ours), "--version"], capture_output=True, text=True, check=False)
    ours_version = (proc.stdout.strip() or "?") + f" (commit {report._commit()})"
    info: dict[str, dict[str, str]] = {}
    peer_binary = peer_pythonpath = None
    for name in wanted:
        contender = CONTENDERS[name]
        if contender.side == "ours":
            info[name] = {"version": ours_version, "flags": " ".join(contender.flags())}
            if contender.executor == "warm" and (problem := warm_import_problem()):
                info[name]["skipped"] = f"the warm executor does not import: {problem}"
        else:
            try:
                peer_binary = peer.binary(args.peer_binary)
                peer_pythonpath = peer.support_path(Path(sys.executable))
                info[name] = {"version": f"ansible-operator {peer.version(peer_binary)}"}
            except peer.PeerUnavailable as exc:
                info[name] = {"version": "?", "skipped": str(exc)}
        if info[name].get("skipped"):
            say(f"skipping {name}: {info[name]['skipped']}")
    tools = Tools(
        kubeconfig=kubeconfig,
        work=work,
        peer_binary=peer_binary,
        peer_pythonpath=peer_pythonpath,
        peer_gather_facts=args.peer_gather_facts,
        **({"peer_collections": args.peer_collections.resolve()} if args.peer_collections else {}),
    )
    if args.peer_collections and PEER in info:
        info[PEER]["collections"] = str(args.peer_collections)
    return tools, info


def _run_all(
    ctx: Context, run: dict[str, Any], scenarios: list[str], active: list[str], kiali: Path | None = None
) -> None:
    """Scenario by scenario, contender by contender; a contender that fails gets an error, the rest go on."""
    from bench import restarting, workloads
    from bench.contenders import CONTENDERS
    from bench.scenarios import idle_baseline, p1, p2, p3, p4, say

    for scenario in scenarios:
        if scenario == "p3" and active:
            run["p3_baseline"] = ctx.idle_baseline = idle_baseline(ctx)
        steps: list[tuple[str, Callable[[Contender], dict[str, Any]]]]
        if scenario == "p2":
            steps = [(str(n), functools.partial(p2, ctx, count=n)) for n in ctx.settings.p2]
        elif scenario == "restart":
            steps = [(str(n), functools.partial(restarting.scenario, ctx, count=n)) for n in ctx.settings.restart]
        elif scenario in ("heavy", "kiali"):
            steps = [("", functools.partial(workloads.scenario, ctx, which=scenario, kiali_path=kiali))]
        else:
            steps = [("", functools.partial({"p1": p1, "p3": p3, "p4": p4}[scenario], ctx))]
        for sub, fn in steps:
            for name in active:
                say(f"{scenario}{' ' + sub if sub else ''}: {name}")
                try:
                    result = fn(CONTENDERS[name])
                except Exception as exc:
                    traceback.print_exc(file=sys.stderr)
                    result = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
                _store(run["scenarios"], scenario, sub, name, result)


def _store(scen: dict[str, Any], scenario: str, sub: str, contender: str, result: dict[str, Any]) -> None:
    if scenario in ("p1",) and "error" not in result:
        for role, res in result.items():
            scen.setdefault("p1", {}).setdefault(role, {})[contender] = res
    elif scenario == "p1":
        for role in ("trivial", "foo"):
            scen.setdefault("p1", {}).setdefault(role, {})[contender] = result
    elif sub:
        scen.setdefault(scenario, {}).setdefault(sub, {})[contender] = result
    else:
        scen.setdefault(scenario, {})[contender] = result


def _notes(args: argparse.Namespace) -> list[str]:
    notes = [
        "each contender runs alone, started fresh per scenario in its own namespace, stopped with SIGTERM after",
        "latencies are from the bench's create call to the watch event showing the condition",
        "RSS sums resident memory over the operator's process tree (shared pages counted per process); "
        "PSS counts shared pages once",
        "CPU is utime+stime of the process tree, finished children included, from /proc",
    ]
    if not args.peer_gather_facts:
        notes.append(
            "the peer runs with ANSIBLE_GATHERING=explicit (no facts, like ours); --peer-gather-facts to change"
        )
    return notes


if __name__ == "__main__":
    raise SystemExit(main())
