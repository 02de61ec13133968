"""How long one reconcile run takes: ansible-runner (``RunnerExecutor``) against forks of a warm Ansible
(``WarmExecutor``), in this process. Prints numbers; never passes or fails.

    .venv/bin/python bench/executors.py [--runs 30] [--parallel 1] [--role trivial|modules|foo]
        [--executors runner,runner+modserver,warm-plain,warm-forked,warm] [--warm-up zygote|child]

``--role heavy`` runs ``bench/projects/heavy`` (~200 tasks, 20 objects applied) on a new Heavy per run, likewise.
``--role foo`` runs ``roles/foo`` on a new Foo per run (its first reconcile, as after a create; needs
``$KUBECONFIG`` and ``kubectl``: the CRD is applied and the Foos are made in a namespace of their own).
With ``--proxy`` each run reaches the API server as the operator's runs do: through the runs' API proxy
(``proxy.server.ApiProxy``, in this process) with a kubeconfig and owner of its own, so the
``hybrid_operator.util`` plugins return the Foo's status and Event in the result instead of calling the API;
the API requests the runs made are counted and printed per run. Without it, modules use ``$KUBECONFIG``.
``--role trivial`` is one ``debug`` task; ``--role modules`` is three module tasks (``stat``, ``command``
and, when ``$KUBECONFIG`` is set, ``kubernetes.core.k8s_info``), which compares the ways a module can
run: a new interpreter per task (``runner``, ``warm-plain``), a fork of the module server
(``runner+modserver``), a fork of Ansible's own worker (``warm-forked``), a fork of the run's own
process, which runs its tasks without a worker fork (``warm``, the default executor).

Per executor: median and p90 latency of one ``run()`` (private data dir, Ansible, events, artifacts),
throughput, and CPU seconds per run (this process's whole tree from /proc, the zygote and the runs it
reaped included, so the number means something on a busy machine too). The warm executor's start-up (its
zygote's imports, warm-up and self-test) is timed separately and not counted in the runs. ``--warm-up
child`` starts the zygote of ``bench/zygotes.py``, which warms up in a forked child instead of in itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybrid_operator.ansible.results import RunResult
from hybrid_operator.ansible.running import ExecutorSettings, RunnerExecutor, RunRequest
from hybrid_operator.ansible.warm import inline
from hybrid_operator.ansible.warm.executor import SERVER, START_TIMEOUT, WarmExecutor
from hybrid_operator.kube.client import Kube
from hybrid_operator.kube.owners import Owner
from hybrid_operator.proxy.server import ApiProxy

if not __package__:  # run as ``python bench/executors.py``: the repository root holds the ``bench`` package
    sys.path.append(str(Path(__file__).resolve().parent.parent))
from bench import procs, zygotes

ROOT = Path(__file__).resolve().parent.parent

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
    tasks: float = 0.0  # task results per run (the median), for CPU per task
    split: CpuSplit | None = None  # where ``cpu`` went: this process (the executor) and the rest of the tree

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
            f"{self.name:<17} runs={len(self.latencies):<4} median={self.median * 1000:7.0f} ms  "
            f"p90={self.p90 * 1000:7.0f} ms  throughput={self.throughput:6.2f} runs/s  "
            f"cpu/run={self.cpu / len(self.latencies) * 1000:6.0f} ms  failed={self.failures}  "
            f"tasks/run={self.tasks:.0f}  cpu/task={self.cpu / len(self.latencies) / max(self.tasks, 1) * 1000:.1f} ms"
            + (self.split.line(len(self.latencies)) if self.split else "")
        )


@dataclass(frozen=True)
class CpuSplit:
    """CPU seconds of this process (the executor's side: its input dirs, the replay into job events, the
    artifacts, the proxy) and of its descendants (the zygote, the runs it forked and reaped, their modules),
    each as user and system time: a run's file work shows as the executor's system time."""

    own_user: float
    own_system: float
    tree_user: float
    tree_system: float

    @classmethod
    def now(cls) -> CpuSplit:
        """This process and its descendants, the live zygote and the runs it has reaped included."""
        me = os.getpid()
        own_user = own_system = tree_user = tree_system = 0.0
        for proc in procs.tree(me):
            system = proc.system_ticks / procs.TICKS
            user = proc.cpu_ticks / procs.TICKS - system
            if proc.pid == me:
                own_user, own_system = user, system
            else:
                tree_user, tree_system = tree_user + user, tree_system + system
        return cls(own_user, own_system, tree_user, tree_system)

    @property
    def total(self) -> float:
        return self.own_user + self.own_system + self.tree_user + self.tree_system

    def since(self, before: CpuSplit) -> CpuSplit:
        return CpuSplit(
            self.own_user - before.own_user,
            self.own_system - before.own_system,
            self.tree_user - before.tree_user,
            self.tree_system - before.tree_system,
        )

    def line(self, runs: int) -> str:
        per = 1000 / max(runs, 1)
        return (
            f"\n{'':<17} cpu/run split: executor user {self.own_user * per:.0f} + system {self.own_system * per:.0f}"
            f" ms, zygote and runs user {self.tree_user * per:.0f} + system {self.tree_system * per:.0f} ms"
        )


MODULES_ROLE = """---
- name: A builtin module
  ansible.builtin.stat:
    path: /
- name: A command
  ansible.builtin.command: "true"
  changed_when: false
- name: A collection module that imports kubernetes
  kubernetes.core.k8s_info:
    kind: Namespace
    name: default
  when: lookup('ansible.builtin.env', 'K8S_AUTH_KUBECONFIG') | length > 0
"""
EXECUTORS = {  # name -> (warm executor?, module_server setting, tasks in-process?)
    "runner": (False, False, False),
    "runner+modserver": (False, True, False),
    "warm-plain": (True, False, True),
    "warm-forked": (True, True, False),  # every task forks Ansible's worker, as before ``inline``
    "warm": (True, True, True),
}
ROLE = "trivial"


FOO_NAMESPACE = "hyop-bench-executors"
FOOS: dict[str, list[dict[str, Any]]] = {}  # executor name -> a new object per run, made by ``make_objects``
OWNER_ENV = "HYBRID_OPERATOR_OWNER"  # as ``reactor.reconciling`` sets it


class CountingProxy:
    """The operator's runs' API proxy, in this process, counting the requests it forwards (method, path)."""

    def __init__(self, scratch: Path) -> None:
        self.proxy = ApiProxy(Kube.connect(os.environ["KUBECONFIG"]), inject=True, on_child=lambda _child: None)
        self.scratch = scratch
        self.requests: list[tuple[str, str]] = []
        forward = self.proxy._forward

        def counted(handler: Any, owner: Owner, token: str, target: str, body: bytes | None) -> None:
            self.requests.append((str(handler.command), target.partition("?")[0]))
            forward(handler, owner, token, target, body)

        self.proxy._forward = counted  # type: ignore[method-assign]
        self.proxy.start()

    def env_for(self, obj: dict[str, Any], run_id: str) -> dict[str, str]:
        """What ``reactor.reconciling`` puts in a run's environment: its owner and its kubeconfig."""
        meta = obj["metadata"]
        owner = Owner(obj["apiVersion"], obj["kind"], meta["name"], meta["namespace"], meta["uid"])
        path = self.scratch / f"{run_id}.kubeconfig"
        path.write_text(self.proxy.kubeconfig_for(owner, run_id), encoding="utf-8")
        as_json = {"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name}
        as_json |= {"namespace": owner.namespace, "uid": owner.uid}
        return {OWNER_ENV: json.dumps(as_json), "KUBECONFIG": str(path), "K8S_AUTH_KUBECONFIG": str(path)}

    def report(self, runs: int) -> str:
        kinds: dict[str, int] = {}
        for method, path in self.requests:
            key = f"{method} {'/'.join(path.split('/')[:3])}..." if path.count("/") > 3 else f"{method} {path}"
            kinds[key] = kinds.get(key, 0) + 1
        detail = ", ".join(f"{n / runs:g} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
        return f"API requests through the proxy per run: {len(self.requests) / runs:.1f} ({detail})"


PROXY: CountingProxy | None = None


def kubectl(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, check=True)
    return done.stdout


# The kinds whose runs need the cluster: (CRD file, group, version, kind, plural, role, spec of object i).
CLUSTER_ROLES: dict[str, tuple[Path, str, str, str, str, str, Callable[[str], dict[str, Any]]]] = {
    "foo": (
        ROOT / "deploy" / "crds" / "foo.yaml",
        "samplecontroller.k8s.io",
        "v1alpha1",
        "Foo",
        "foos",
        "foo",
        lambda name: {"deploymentName": f"{name}-web", "replicas": 1},
    ),
    "heavy": (
        ROOT / "bench" / "crds" / "heavy.yaml",
        "bench.hybrid-operator.dev",
        "v1alpha1",
        "Heavy",
        "heavies",
        "heavy",
        lambda name: {"version": "v1.2", "deployment": {"replicas": 1}},
    ),
}


def make_objects(executor: str, count: int) -> None:
    """``count`` new objects of the role's kind for ``executor``'s runs (each run is an object's first
    reconcile, as after a create)."""
    crd, group, version, kind, plural, _role, spec = CLUSTER_ROLES[ROLE]
    kubectl("apply", "-f", str(crd))
    kubectl("wait", "--for=condition=Established", f"crd/{plural}.{group}", "--timeout=60s")
    # The previous invocation deletes the namespace without waiting: wait until it is gone.
    phase = kubectl("get", "namespace", FOO_NAMESPACE, "--ignore-not-found", "-o", "jsonpath={.status.phase}")
    if phase == "Terminating":
        kubectl("wait", "--for=delete", f"namespace/{FOO_NAMESPACE}", "--timeout=120s")
    with contextlib.suppress(subprocess.CalledProcessError):
        kubectl("create", "namespace", FOO_NAMESPACE)
    names = [f"{executor}-{i}" for i in range(count)]
    items = [
        {
            "apiVersion": f"{group}/{version}",
            "kind": kind,
            "metadata": {"name": name, "namespace": FOO_NAMESPACE},
            "spec": spec(name),
        }
        for name in names
    ]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    found = json.loads(kubectl("get", f"{plural}.{group}", "-n", FOO_NAMESPACE, "-o", "json"))["items"]
    by_name = {obj["metadata"]["name"]: obj for obj in found}
    FOOS[executor] = [by_name[name] for name in names]


def request(i: int, executor: str = "") -> RunRequest:
    if ROLE in CLUSTER_ROLES:
        _crd, group, version, kind, _plural, role, _spec = CLUSTER_ROLES[ROLE]
        obj = FOOS[executor][i]
        run_id = f"run{i:05d}"
        env = PROXY.env_for(obj, run_id) if PROXY else {"K8S_AUTH_KUBECONFIG": os.environ["KUBECONFIG"]}
        return RunRequest(run_id=run_id, group=group, version=version, kind=kind, obj=obj, role=role, env=env)
    obj = {"apiVersion": "bench.example.com/v1", "kind": "Bench", "metadata": {"name": f"obj{i % 8}", "namespace": "b"}}
    env = {"K8S_AUTH_KUBECONFIG": os.environ["KUBECONFIG"]} if os.environ.get("KUBECONFIG") else {}
    return RunRequest(
        run_id=f"run{i:05d}", group="bench.example.com", version="v1", kind="Bench", obj=obj, role=ROLE, env=env
    )


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
            result = executor.run(request(i, name))
            with lock:
                latencies.append(time.monotonic() - started)
                results.append(result)

    split_before = CpuSplit.now()
    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(parallel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    split = CpuSplit.now().since(split_before)
    failures = sum(1 for r in results if not r.succeeded)
    tasks = statistics.median(r.ok + r.skipped + r.failures + r.unreachable for r in results) if results else 0
    return Numbers(name, latencies, wall, split.total, failures, tasks, split)


def run_one(name: str, args: argparse.Namespace, scratch: Path, server: tuple[str, ...]) -> Numbers:
    """Start executor ``name``, measure its runs, print the numbers, stop it."""
    global PROXY
    warm, module_server, inline_tasks = EXECUTORS[name]
    os.environ[inline.DISABLE_ENV] = "1" if inline_tasks else "0"  # read when the zygote starts
    settings = ExecutorSettings(
        artifacts_root=scratch / name,
        roles_paths=(scratch / "roles", ROOT / "roles", ROOT / "bench" / "projects" / "heavy" / "roles"),
        module_server=module_server,
    )
    if ROLE in CLUSTER_ROLES:
        make_objects(name, args.runs)
        if args.proxy:
            PROXY = CountingProxy(scratch)
    executor: RunnerExecutor | WarmExecutor
    if warm:
        started = time.monotonic()
        executor = WarmExecutor(settings, server)
        version = executor.wait_until_ready(START_TIMEOUT)
        print(f"{name:<17} zygote ready in {time.monotonic() - started:.2f} s (ansible-core {version})")
    else:
        executor = RunnerExecutor(settings)
    try:
        numbers = measure(name, executor, args.runs, args.parallel)
    finally:
        executor.close()
    print(numbers.line())
    if PROXY is not None:
        print(f"{name:<17} {PROXY.report(args.runs)}")
        PROXY.proxy.stop()
    return numbers


def main() -> int:
    global ROLE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=30, help="runs per executor (default 30)")
    parser.add_argument("--parallel", type=int, default=1, help="worker threads calling run() at once")
    parser.add_argument("--warm-up", choices=("zygote", "child"), default="zygote", help="see bench/zygotes.py")
    roles = ("trivial", "modules", *CLUSTER_ROLES)
    parser.add_argument("--role", choices=roles, default="trivial", help="what each run does")
    parser.add_argument("--executors", default="runner,warm", help=f"comma-separated, of {', '.join(EXECUTORS)}")
    parser.add_argument("--proxy", action="store_true", help="--role foo: through the runs' API proxy, counted")
    args = parser.parse_args()
    names = [n for n in args.executors.split(",") if n]
    unknown = [n for n in names if n not in EXECUTORS]
    if unknown:
        parser.error(f"unknown executors: {', '.join(unknown)}")
    ROLE = args.role

    scratch = Path(tempfile.mkdtemp(prefix="hyop-bench-"))
    try:
        for role, text in (("trivial", TRIVIAL_ROLE), ("modules", MODULES_ROLE)):
            tasks = scratch / "roles" / role / "tasks"
            tasks.mkdir(parents=True)
            (tasks / "main.yml").write_text(text, encoding="utf-8")
        print(f"role {args.role}: {args.runs} runs per executor, {args.parallel} at a time")
        print(f"on {os.cpu_count()} CPUs; python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f}")
        measured: dict[str, Numbers] = {}
        server = zygotes.SERVER if args.warm_up == "child" else SERVER
        for name in names:
            measured[name] = run_one(name, args, scratch, server)
        if names and names[0] in measured:
            base = measured[names[0]]
            for name in names[1:]:
                other = measured[name]
                print(
                    f"{name:<17} vs {names[0]}: median x{base.median / other.median:.1f}  "
                    f"throughput x{other.throughput / base.throughput:.1f}  cpu/run x{base.cpu / other.cpu:.1f}"
                )
        print(f"load average now {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if ROLE in CLUSTER_ROLES:
            with contextlib.suppress(subprocess.CalledProcessError):
                kubectl("delete", "namespace", FOO_NAMESPACE, "--wait=false")
    return 0


if __name__ == "__main__":
    sys.exit(main())
