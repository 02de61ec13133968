"""The contenders, and one of them running as a real process against the cluster.

``runner`` is our operator as operator-sdk runs roles (one ansible-runner process per reconcile, a new
interpreter per module): the baseline. ``runner+modserver`` adds the warm module server, ``warm`` runs
whole reconciles in forks of a warm Ansible, and ``peer`` is operator-sdk's Go ``ansible-operator``.
``Running.start`` launches one of them in a session of its own, scoped to one namespace with
WATCH_NAMESPACE, waits for /readyz, and samples its process tree; ``stop`` sends SIGTERM, then SIGKILL
to the session's process group after a grace period.

Both sides get the same environment: the project's virtualenv first on PATH, the admin kubeconfig,
their defaults for verbosity and concurrency. The peer also gets the collections directory shipped in
our package (so roles/foo's ``hybrid_operator.util.*`` resolve; without HYBRID_OPERATOR_OWNER those
plugins patch the API directly), upstream's event plugin on PYTHONPATH (``peer``), and, unless asked
otherwise, ANSIBLE_GATHERING=explicit: our operator never gathers facts a role did not ask for, and
this is upstream's switch to do the same.

``warm-cache`` is ``warm`` with ``--proxy-cache-reads=true``: the runs' reads of kinds the operator watches
(a Foo's Deployment) are answered from its informers' caches.

``warm-engine`` is ``warm`` with the lean path off (``HYBRID_OPERATOR_LEAN=0``: every task on Ansible's own
steps, every API module in a fork), what ``warm`` was before it.

``warm-fresh-fork`` is ``warm`` without the zygote's spare (``HYBRID_OPERATOR_SPARE_RUN=0``): every run is
forked when it arrives, as before spares.

``warm-memory`` is ``warm`` with its ``--runner-artifacts-dir`` and its runs' ``TMPDIR`` in a directory of its
own on a memory-backed file system (``MEMORY_FS``), as an operator whose ``/tmp`` volume is an ``emptyDir``
with ``medium: Memory``: what the files a run leaves cost on the disk of the machine it runs on. Removed
when it stops.

``warm-skip`` is ``warm`` with ``skipConvergedAtStart`` on the Foo watch: at start-up, a Foo its last run
converged (and whose Deployment nobody changed since) is not run again.

``warm-sharded-N`` is ``warm`` as N replicas with ``--sharding`` (their ring's Leases in the contender's
namespace), replica i pinned to CPU i with ``taskset -c`` so that each has a core of its own: what
scaling out buys, measured. The figures (CPU, runs) are summed over the replicas.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import hybrid_operator
from bench import procs
from bench.scraping import http_get, metric_sum

ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS = Path(hybrid_operator.__file__).resolve().parent / "collections"
Env = dict[str, str]


@dataclass(frozen=True)
class Contender:
    name: str
    side: str  # "ours" or "peer"
    executor: str = ""
    module_server: bool = False
    replicas: int = 0  # > 0: that many replicas with --sharding, each pinned to a CPU of its own
    # Ours: the Foo watch declares watchDependentStatusChanges, as the project's watches.yaml does (a
    # Deployment's status wakes its Foo); off, the foo role's timed requeue reads it (the peer's way).
    status_wake: bool = False
    cache_reads: bool = False  # ours: --proxy-cache-reads=true (runs' reads of watched kinds from the cache)
    skip_converged: bool = False  # ours: the watch has skipConvergedAtStart (converged objects skip the start-up run)
    lean: bool = True  # ours, warm: the lean path where the ansible-core minor has it (False: HYBRID_OPERATOR_LEAN=0)
    spare: bool = True  # ours, warm: the zygote forks the next run's child ahead (False: HYBRID_OPERATOR_SPARE_RUN=0)
    memory: bool = False  # ours: artifacts and the runs' TMPDIR on MEMORY_FS (an emptyDir with medium: Memory)

    @property
    def slug(self) -> str:
        return self.name.replace("+", "-")

    def flags(self) -> list[str]:
        if self.side != "ours":
            return []
        flags = ["--executor", self.executor, "--module-server", "true" if self.module_server else "false"]
        return [*flags, "--proxy-cache-reads=true"] if self.cache_reads else flags


CONTENDERS: dict[str, Contender] = {
    "runner": Contender("runner", "ours", "runner", False, status_wake=True),
    "runner+modserver": Contender("runner+modserver", "ours", "runner", True, status_wake=True),
    "warm": Contender("warm", "ours", "warm", True, status_wake=True),
    "warm-poll": Contender("warm-poll", "ours", "warm", True),
    "warm-cache": Contender("warm-cache", "ours", "warm", True, status_wake=True, cache_reads=True),
    "warm-skip": Contender("warm-skip", "ours", "warm", True, status_wake=True, skip_converged=True),
    "warm-fresh-fork": Contender("warm-fresh-fork", "ours", "warm", True, status_wake=True, spare=False),
    "warm-engine": Contender("warm-engine", "ours", "warm", True, status_wake=True, lean=False),
    "warm-memory": Contender("warm-memory", "ours", "warm", True, status_wake=True, memory=True),
    "peer": Contender("peer", "peer"),
    "warm-sharded-1": Contender("warm-sharded-1", "ours", "warm", True, replicas=1, status_wake=True),
    "warm-sharded-2": Contender("warm-sharded-2", "ours", "warm", True, replicas=2, status_wake=True),
}
BASELINE = "runner"
MEMORY_FS = Path("/dev/shm")  # where ``memory`` contenders keep their files: tmpfs on Linux
PEER = "peer"
# The peer's runs reach the API through its proxy at http://localhost:8888 whatever --proxy-port says
# (v1.42.0 hard-codes the address in the per-run kubeconfig, internal/ansible/controller/reconcile.go):
# so the port stays at its default, and only one peer can run on a machine at a time.
PEER_PROXY_PORT = 8888


@dataclass(frozen=True)
class Tools:
    """Everything needed to start contenders, resolved once per bench run."""

    kubeconfig: str
    work: Path  # per-run scratch: watches files, logs, our artifacts
    bin_dir: Path = Path(sys.executable).parent
    peer_binary: Path | None = None
    peer_pythonpath: Path | None = None
    peer_gather_facts: bool = False
    peer_collections: Path = COLLECTIONS

    @property
    def ours(self) -> Path:
        return self.bin_dir / "hybrid-operator"


def memory_directory(label: str) -> Path:
    """A new directory of this user's on ``MEMORY_FS`` for a ``memory`` contender."""
    if not MEMORY_FS.is_dir() or "tmpfs" not in _file_system_type(MEMORY_FS):
        raise RuntimeError(f"{MEMORY_FS} is not a tmpfs here: the memory contenders need one")
    return Path(tempfile.mkdtemp(prefix=f"hyop-bench-{label}-", dir=MEMORY_FS))


def _file_system_type(path: Path) -> str:
    """The type /proc/self/mounts gives for the mount ``path`` is on ("" when unknown)."""
    best, kind = "", ""
    with contextlib.suppress(OSError), open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            fields = line.split()
            mount = fields[1] if len(fields) > 2 else ""
            inside = str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")
            if mount and inside and len(mount) >= len(best):
                best, kind = fields[1], fields[2]
    return kind


def warm_import_problem(python: str = sys.executable) -> str | None:
    """Why the warm executor cannot be used, or None. Checked in a fresh interpreter."""
    proc = subprocess.run(
        [python, "-P", "-c", "from hybrid_operator.ansible.warm.executor import WarmExecutor"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=120,
    )
    if proc.returncode == 0:
        return None
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"import failed (exit {proc.returncode})"


def port_in_use(port: int) -> bool:
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family) as sock:
            sock.settimeout(1)
            if sock.connect_ex((address, port)) == 0:
                return True
    return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Running:
    """One contender process, started for one scenario."""

    contender: Contender
    proc: subprocess.Popen[bytes]
    log_path: Path
    namespace: str
    metrics_port: int
    health_port: int
    artifacts: Path | None  # ours: the --runner-artifacts-dir given; the peer's are found by watching
    sampler: procs.Sampler
    started: float = field(default_factory=time.monotonic)
    others: list[Running] = field(default_factory=list)  # the further replicas of a sharded contender
    memory_dir: Path | None = None  # a ``memory`` contender's directory on MEMORY_FS, removed at ``stop``

    @classmethod
    def start(
        cls, contender: Contender, tools: Tools, watches: Path, namespace: str, label: str, env: Env | None = None
    ) -> Running:
        """``env``: more environment for it (a workload's Ansible settings; both sides get the same)."""
        if contender.replicas < 2:
            return cls._start_one(contender, tools, watches, namespace, label, 0, env or {})
        first = cls._start_one(contender, tools, watches, namespace, label, 0, env or {})
        first.others = [
            cls._start_one(contender, tools, watches, namespace, f"{label}-{i}", i, env or {})
            for i in range(1, contender.replicas)
        ]
        return first

    @classmethod
    def _start_one(
        cls, contender: Contender, tools: Tools, watches: Path, namespace: str, label: str, index: int, extra: Env
    ) -> Running:
        metrics_port, health_port = free_port(), free_port()
        log_path = tools.work / f"{label}.log"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("HYBRID_OPERATOR_", "WATCHES_FILE"))},
            "PATH": f"{tools.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "KUBECONFIG": tools.kubeconfig,
            "WATCH_NAMESPACE": namespace,
            **extra,
        }
        listen = ["--metrics-bind-address", f"127.0.0.1:{metrics_port}"]
        listen += ["--health-probe-bind-address", f"127.0.0.1:{health_port}"]
        artifacts: Path | None = None
        memory_dir: Path | None = None
        if contender.side == "ours":
            artifacts = tools.work / f"{label}-artifacts"
            if contender.memory:
                memory_dir = memory_directory(label)
                artifacts = memory_dir / "artifacts"
                env["TMPDIR"] = str(memory_dir)
            cmd = [str(tools.ours), "run", "--watches-file", str(watches), *contender.flags(), *listen]
            cmd += ["--runner-artifacts-dir", str(artifacts)]
            if contender.replicas:
                cmd += ["--sharding", "--leader-election-namespace", namespace]
                cmd = ["taskset", "-c", str(index % (os.cpu_count() or 1)), *cmd]
                env["POD_NAME"] = f"{contender.slug}-{index}"
            if not contender.lean:
                env["HYBRID_OPERATOR_LEAN"] = "0"
            if not contender.spare:
                env["HYBRID_OPERATOR_SPARE_RUN"] = "0"
        else:
            if tools.peer_binary is None:
                raise RuntimeError("no peer binary")
            if port_in_use(PEER_PROXY_PORT):
                raise RuntimeError(f"localhost:{PEER_PROXY_PORT} is in use (another peer running?); the peer needs it")
            cmd = [str(tools.peer_binary), "run", "--watches-file", str(watches), *listen]
            cmd += ["--ansible-collections-path", str(tools.peer_collections)]
            env["ANSIBLE_COLLECTIONS_PATH"] = str(tools.peer_collections)
            env["VIRTUAL_ENV"] = sys.prefix  # the peer points ansible_python_interpreter at $VIRTUAL_ENV
            if tools.peer_pythonpath is not None:
                env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tools.peer_pythonpath), env.get("PYTHONPATH")) if p)
            if not tools.peer_gather_facts:
                env["ANSIBLE_GATHERING"] = "explicit"
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tools.work, start_new_session=True
            )
        sampler = procs.Sampler(proc.pid)
        sampler.start()
        return cls(
            contender, proc, log_path, namespace, metrics_port, health_port, artifacts, sampler, memory_dir=memory_dir
        )

    # ----------------------------------------------------------------------------------- state

    def wait_ready(self, timeout: float = 120) -> None:
        for other in self.others:
            other.wait_ready(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.contender.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            if http_get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2)[0] == 200:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.contender.name} not ready after {timeout}s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc.poll() is None and all(other.alive() for other in self.others)

    def metrics(self) -> str:
        status, body = http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")
        return body if status == 200 else ""

    def runs(self) -> float:
        """Reconciles that ran Ansible so far: the count of the ``ansible_operator_reconciles`` histogram.

        Both sides export it under upstream's name; upstream observes it around each ansible-runner run,
        we around each whole reconcile.
        """
        own = metric_sum(self.metrics(), "ansible_operator_reconciles_count")
        return own + sum(other.runs() for other in self.others)

    def proxy_reads(self) -> dict[str, float] | None:
        """Ours: the runs' GETs through the proxy so far, by where they were answered (cache, api)."""
        if self.contender.side != "ours":
            return None
        text = self.metrics()
        return {
            "cache": metric_sum(text, "hybrid_operator_proxy_reads_total", lambda labels: '"cache"' in labels),
            "api": metric_sum(text, "hybrid_operator_proxy_reads_total", lambda labels: '"api"' in labels),
        }

    def client_requests(self) -> float | None:
        """The peer's own count of API requests (client-go's ``rest_client_requests_total``); ours has none."""
        if self.contender.side != "peer":
            return None
        return metric_sum(self.metrics(), "rest_client_requests_total")

    def usage(self) -> procs.Usage:
        total = procs.usage(self.proc.pid)
        for other in self.others:
            more = other.usage()
            total = procs.Usage(
                total.processes + more.processes, total.rss_bytes + more.rss_bytes, total.cpu_seconds + more.cpu_seconds
            )
        return total

    def pss_bytes(self) -> int:
        return procs.pss_bytes(self.proc.pid) + sum(other.pss_bytes() for other in self.others)

    def artifact_dirs(self) -> list[Path]:
        """Where this process keeps run artifacts for its namespace."""
        if self.artifacts is not None:
            return [self.artifacts, *(d for other in self.others for d in other.artifact_dirs())]
        # The peer has no flag for it: its input dirs are <fixed root>/<group>/<version>/<kind>/<ns>/<name>,
        # passed to every ansible-runner it starts ("ansible-runner run <dir> ..."), so read them there.
        found: set[Path] = set()
        for argv in list(self.sampler.commands):
            for i, arg in enumerate(argv[:-2]):
                if arg.endswith("ansible-runner") and argv[i + 1] == "run":
                    input_dir = Path(argv[i + 2])
                    if input_dir.parent.name == self.namespace:
                        found.add(input_dir.parent)
        return sorted(found)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------------------------------ stop

    def stop(self, grace: float = 40) -> int | None:
        """SIGTERM, up to ``grace`` seconds to drain, then SIGKILL to whatever is left of the session."""
        for other in self.others:
            other.stop(grace)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace)
        if self.proc.poll() is None or procs.tree(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # our own process group (start_new_session)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        self.sampler.stop()
        if self.memory_dir is not None:
            shutil.rmtree(self.memory_dir, ignore_errors=True)
        return self.proc.returncode
