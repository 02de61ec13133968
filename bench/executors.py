"""How long one reconcile run takes: ansible-runner (``RunnerExecutor``) against forks of a warm Ansible
(``WarmExecutor``), on a trivial role, in this process. Prints numbers; never passes or fails.

    .venv/bin/python bench/executors.py [--runs 30] [--parallel 1] [--warm-up zygote|child|none]

Per executor: median and p90 latency of one ``run()`` (private data dir, Ansible, events, artifacts),
throughput, and CPU seconds per run (the operator process plus every process the run started, so the
number means something on a busy machine too). The warm executor's start-up (its zygote's imports and
warm-up) is timed separately and not counted in the runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hybrid_operator.ansible.results import RunResult
from hybrid_operator.ansible.running import ExecutorSettings, RunnerExecutor, RunRequest
from hybrid_operator.ansible.warm import START_TIMEOUT, WarmExecutor

TRIVIAL_ROLE = """---
- name: Say hello
  ansible.builtin.debug:
    msg: "hello {{ ansible_operator_meta.name }}"
"""


@dataclass
class Numbers:
    name: str
    latencies: list[float]
    wall: float
    cpu: float
    failures: int

    @property
    def median(self) -> float:
        return statistics.median(self.latencies)

    @property
    def p90(self) -> float:
        if len(self.latencies) < 2:
            return self.latencies[0]
        return statistics.quantiles(self.latencies, n=10, method="inclusive")[-1]

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.wall

    def line(self) -> str:
        return (
            f"{self.name:<8} runs={len(self.latencies):<4} median={self.median * 1000:7.0f} ms  "
            f"p90={self.p90 * 1000:7.0f} ms  throughput={self.throughput:6.2f} runs/s  "
            f"cpu/run={self.cpu / len(self.latencies) * 1000:6.0f} ms  failed={self.failures}"
        )


def request(i: int) -> RunRequest:
    obj = {"apiVersion": "bench.example.com/v1", "kind": "Bench", "metadata": {"name": f"obj{i % 8}", "namespace": "b"}}
    return RunRequest(
        run_id=f"run{i:05d}", group="bench.example.com", version="v1", kind="Bench", obj=obj, role="trivial"
    )


def cpu_of_this_process_tree() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(name: str, executor: RunnerExecutor | WarmExecutor, runs: int, parallel: int) -> Numbers:
    latencies: list[float] = []
    results: list[RunResult] = []
    lock = threading.Lock()
    counter = iter(range(runs))

    def worker() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            started = time.monotonic()
            result = executor.run(request(i))
            with lock:
                latencies.append(time.monotonic() - started)
                results.append(result)

    cpu_before = cpu_of_this_process_tree()
    warm_cpu_before = executor.cpu_seconds if isinstance(executor, WarmExecutor) else 0.0
    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(parallel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    cpu = cpu_of_this_process_tree() - cpu_before
    if isinstance(executor, WarmExecutor):  # the forks are the zygote's children, not ours
        cpu += executor.cpu_seconds - warm_cpu_before
    failures = sum(1 for r in results if not r.succeeded)
    return Numbers(name, latencies, wall, cpu, failures)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=30, help="runs per executor (default 30)")
    parser.add_argument("--parallel", type=int, default=1, help="worker threads calling run() at once")
    parser.add_argument("--warm-up", choices=("zygote", "child", "none"), default="zygote", help="see zygote.py")
    parser.add_argument("--module-server", action="store_true", help="run modules through the module server")
    parser.add_argument("--only", choices=("runner", "warm"), help="measure one executor only")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="hyop-bench-"))
    try:
        tasks = scratch / "roles" / "trivial" / "tasks"
        tasks.mkdir(parents=True)
        (tasks / "main.yml").write_text(TRIVIAL_ROLE, encoding="utf-8")

        def settings(name: str) -> ExecutorSettings:
            return ExecutorSettings(
                artifacts_root=scratch / name, roles_paths=(scratch / "roles",), module_server=args.module_server
            )

        print(f"{args.runs} runs per executor, {args.parallel} at a time; load average {os.getloadavg()[0]:.1f}")
        print(f"on {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
        measured: dict[str, Numbers] = {}
        if args.only != "warm":
            runner = RunnerExecutor(settings("runner"))
            try:
                measured["runner"] = measure("runner", runner, args.runs, args.parallel)
            finally:
                runner.close()
            print(measured["runner"].line())
        if args.only != "runner":
            WarmExecutor.warm_up = args.warm_up
            started = time.monotonic()
            warm = WarmExecutor(settings("warm"))
            try:
                version = warm.wait_until_ready(START_TIMEOUT)
                print(f"warm     zygote ready in {time.monotonic() - started:.2f} s (ansible-core {version})")
                measured["warm"] = measure("warm", warm, args.runs, args.parallel)
            finally:
                warm.close()
            print(measured["warm"].line())
        if len(measured) == 2:
            runner_numbers, warm_numbers = measured["runner"], measured["warm"]
            print(
                f"ratio    median x{runner_numbers.median / warm_numbers.median:.1f}  "
                f"p90 x{runner_numbers.p90 / warm_numbers.p90:.1f}  "
                f"throughput x{warm_numbers.throughput / runner_numbers.throughput:.1f}  "
                f"cpu/run x{runner_numbers.cpu / warm_numbers.cpu:.1f}  (runner / warm)"
            )
        print(f"load average now {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
