"""Before/after with both sides warm at once: two warm executors in this process, their runs interleaved one
by one, each side's zygote started first in one half and second in the other.

    .venv/bin/python -m bench.interleaved --before-env HYBRID_OPERATOR_X=0 --role foo --runs 40
    .venv/bin/python -m bench.interleaved --after-env HYBRID_OPERATOR_X=1 --role heavy --runs 12
    .venv/bin/python -m bench.interleaved --before-roles <dir with an older roles/foo> --role foo --runs 30

What ``bench.ab`` cannot see on a machine whose speed drifts by a factor of two within minutes (this one
does): ``bench.ab`` compares whole rounds of runs, minutes apart. Here the two sides run the same role on
objects made alike, one run each in turn, so a run of one side and the next run of the other see the same
machine. The zygotes read their settings from the environment when they start, so a setting that changes
what a zygote does (``HYBRID_OPERATOR_IMMORTAL_HEAP``, ``HYBRID_OPERATOR_LEAN``, ...) is what the two sides
differ by; the package is the working tree's for both (``bench.ab --before REF`` compares versions). Or a
role: ``--before-roles DIR`` (``--after-roles DIR``) puts a roles directory first on that side's roles path,
so ``DIR/foo`` (say, ``git archive`` of an older ``roles/foo``) is the role that side runs as ``foo``.

Two zygotes side by side are not alike either: measured with the same setting on both sides, the zygote
started first cost ~20-80 ms more a run than the other, whichever it was. So the runs are done twice, with the
start order swapped; the difference of the sides is the mean of the two halves' paired differences (the
start order's share, their half-difference, cancels out and is printed as such). CPU per run is the run's
process tree, read from the zygote's reaped children (``procs``); latency is one ``run()``. Numbers, never
pass/fail. ``--role foo`` and ``--role heavy`` need ``$KUBECONFIG`` (see ``bench/executors.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as ``python bench/interleaved.py``
    sys.path.append(str(Path(__file__).resolve().parent.parent))
from bench import executors, procs
from hybrid_operator.ansible.running import ExecutorSettings
from hybrid_operator.ansible.warm import inline
from hybrid_operator.ansible.warm.executor import SERVER, START_TIMEOUT, WarmExecutor

Half = dict[str, list[tuple[float, float]]]  # side -> (CPU seconds, latency seconds) per run


def _env(pairs: list[str]) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in pairs)


def _start(side: str, env: dict[str, str], scratch: Path, roles: tuple[Path, ...]) -> WarmExecutor:
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)  # what the zygote reads when it starts
    try:
        settings = ExecutorSettings(
            artifacts_root=scratch / side,
            roles_paths=(
                *roles,
                scratch / "roles",
                executors.ROOT / "roles",
                executors.ROOT / "bench/projects/heavy/roles",
            ),
            module_server=True,
        )
        warm = WarmExecutor(settings, SERVER)
        warm.wait_until_ready(START_TIMEOUT)
        return warm
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _half(
    order: tuple[str, str],
    envs: dict[str, dict[str, str]],
    runs: int,
    scratch: Path,
    roles: dict[str, tuple[Path, ...]],
) -> Half:
    """Start the sides' zygotes in ``order``, then ``runs`` runs each, alternating which goes first."""
    for side in order:
        if executors.ROLE in executors.CLUSTER_ROLES:
            executors.make_objects(side, runs)
    started = {side: _start(side, envs[side], scratch, roles[side]) for side in order}
    measured: Half = {side: [] for side in order}
    try:
        for i in range(runs):
            for side in order if i % 2 == 0 else order[::-1]:
                zygote = started[side].zygote_pid
                if zygote is None:
                    raise RuntimeError(f"{side}: the warm executor has no zygote (see its log)")
                cpu, begun = procs.usage(zygote).cpu_seconds, time.monotonic()
                result = started[side].run(executors.request(i, side))
                latency = time.monotonic() - begun
                time.sleep(0.05)  # the zygote reaps the run's process: its CPU is then in the zygote's total
                if not result.succeeded:
                    raise RuntimeError(f"{side} run {i} failed: {result.error}")
                measured[side].append((procs.usage(zygote).cpu_seconds - cpu, latency))
    finally:
        for warm in started.values():
            warm.close()
    return measured


def _paired(half: Half, index: int) -> list[float]:
    return [a[index] - b[index] for a, b in zip(half["after"], half["before"], strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--before-env", action="append", default=[], metavar="K=V")
    parser.add_argument("--after-env", action="append", default=[], metavar="K=V")
    parser.add_argument("--before-roles", type=Path, help="a roles directory first on the before side's path")
    parser.add_argument("--after-roles", type=Path, help="a roles directory first on the after side's path")
    parser.add_argument("--role", choices=("trivial", *executors.CLUSTER_ROLES), default="foo")
    parser.add_argument("--runs", type=int, default=30, help="runs per side in each half (default 30)")
    args = parser.parse_args()
    envs = {"before": _env(args.before_env), "after": _env(args.after_env)}
    roles: dict[str, tuple[Path, ...]] = {
        side: (path.resolve(),) if path else ()
        for side, path in (("before", args.before_roles), ("after", args.after_roles))
    }
    if envs["before"] == envs["after"] and roles["before"] == roles["after"]:
        parser.error("nothing differs: give --before-env, --after-env, --before-roles or --after-roles")
    for path in (*roles["before"], *roles["after"]):
        if not path.is_dir():
            parser.error(f"{path}: not a directory")
    executors.ROLE = args.role
    os.environ[inline.DISABLE_ENV] = "1"
    scratch = Path(tempfile.mkdtemp(prefix="hyop-interleaved-"))
    tasks = scratch / "roles" / "trivial" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(executors.TRIVIAL_ROLE, encoding="utf-8")
    if args.role in executors.CLUSTER_ROLES and os.environ.get("KUBECONFIG"):
        executors.PROXY = executors.CountingProxy(scratch)
    print(
        f"role {args.role}: {args.runs} runs a side in each half; "
        f"before {envs['before']} {[str(p) for p in roles['before']]}, "
        f"after {envs['after']} {[str(p) for p in roles['after']]}"
    )
    print(f"on {os.cpu_count()} CPUs; python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f}")
    try:
        halves = [_half(order, envs, args.runs, scratch, roles) for order in (("after", "before"), ("before", "after"))]
    finally:
        if executors.PROXY is not None:
            executors.PROXY.proxy.stop()
        if args.role in executors.CLUSTER_ROLES:
            with contextlib.suppress(subprocess.CalledProcessError):
                executors.kubectl("delete", "namespace", executors.FOO_NAMESPACE, "--wait=false")
    for number, half in enumerate(halves, 1):
        for side in ("before", "after"):
            cpu = statistics.median(c for c, _ in half[side]) * 1000
            latency = statistics.median(t for _, t in half[side]) * 1000
            print(f"half {number} ({'after' if number == 1 else 'before'} started first) {side:<6}: ", end="")
            print(f"CPU per run median {cpu:5.0f} ms, latency median {latency:5.0f} ms")
    for index, what in ((0, "CPU per run"), (1, "latency")):
        means = [statistics.mean(_paired(half, index)) * 1000 for half in halves]
        print(
            f"{what}: after - before, paired run by run: {(means[0] + means[1]) / 2:+.0f} ms "
            f"(halves {means[0]:+.0f} and {means[1]:+.0f} ms; the first-started zygote's share "
            f"{(means[0] - means[1]) / 2:+.0f} ms)"
        )
    print(f"load average now {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
