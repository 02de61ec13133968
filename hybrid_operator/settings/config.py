"""Flags and environment: operator-sdk's names, parsed once into a typed ``Config``.

``cli`` builds the parser and calls ``from_args``; the reactor reads the result. Per-kind overrides come
from the environment as upstream names them: ``MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>`` and
``ANSIBLE_VERBOSITY_<KIND>_<GROUP>`` (upper case, dots and dashes to underscores).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hybrid_operator import eventlog
from hybrid_operator.errors import ConfigError
from hybrid_operator.kube.objects import GVK
from hybrid_operator.settings.durations import parse_duration, parse_period

CPUS = max(1, os.cpu_count() or 1)


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _period(text: str) -> float:
    """A reconcile period, bounded as watches.yaml's and the annotation's are (0, or 1s-8760h)."""
    try:
        return parse_period(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def ansible_args(text: str) -> str:
    """``--ansible-args`` as operator-sdk reads it: one pair of surrounding single quotes removed.

    operator-sdk's scaffold and docs write ``--ansible-args='--vault-password-file /opt/ansible/pwd.yml'``
    in a Deployment's ``args``, where no shell removes the quotes, so they reach the operator; upstream
    drops the first and last character when the value starts with ``'`` and ends with the same. Kept, the
    quotes made ansible-runner's ``shlex.split`` pass the whole value as one unknown argument. Only the one
    pair goes: quoting inside the value is still ansible-runner's to split.
    """
    if len(text) >= 2 and text.startswith("'") and text.endswith("'"):
        return text[1:-1]
    return text


def _inventory(env: Mapping[str, str]) -> Path | None:
    """``ANSIBLE_INVENTORY`` of the operator's own environment, as operator-sdk reads it: one file or directory
    that replaces the generated ``localhost`` inventory of every run (copied in per run, so an edit counts).

    Upstream finds a missing path at each run and fails it; here the operator refuses to start, naming it.
    Never anything from a resource: a spec key cannot name an inventory (``ansible_*`` keys are refused).
    """
    raw = env.get("ANSIBLE_INVENTORY", "")
    if not raw:
        return None
    path = Path(raw)
    if not (path.is_file() or path.is_dir()):
        raise ConfigError(
            f"ANSIBLE_INVENTORY={raw} is neither a file nor a directory; operator-sdk reads it as one inventory "
            "path (no comma lists) and copies it into each run"
        )
    return path


def _log_level(text: str) -> str:
    try:
        return eventlog.parse_level(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _zap_level(text: str) -> str:
    """controller-runtime's --zap-log-level: debug, info, error, panic, or a verbosity number (> 0 is debug)."""
    lowered = text.strip().lower()
    named = {"debug": "DEBUG", "info": "INFO", "warn": "WARNING", "error": "ERROR", "dpanic": "CRITICAL"}
    named["panic"] = named["fatal"] = "CRITICAL"
    if lowered in named:
        return named[lowered]
    if lowered.isdigit():
        return "DEBUG" if int(lowered) > 0 else "INFO"
    raise argparse.ArgumentTypeError(f"expected debug, info, error, panic or a number, got {text!r}")


def _zap_encoder(text: str) -> str:
    """controller-runtime's --zap-encoder: json, or console (our text format)."""
    lowered = text.strip().lower()
    if lowered not in ("json", "console"):
        raise argparse.ArgumentTypeError(f"expected json or console, got {text!r}")
    return "json" if lowered == "json" else "text"


class _Ignored(argparse.Action):
    """A flag upstream has and we accept without effect; cli logs a warning naming it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        ignored = [*getattr(namespace, "ignored_flags", []), option_string or self.dest]
        namespace.ignored_flags = ignored


def _switch(parser: argparse.ArgumentParser, name: str, default: bool, help: str) -> None:
    """A boolean flag as Go's flag package reads one: ``--name``, ``--name=true``, ``--name=false``."""
    parser.add_argument(name, type=_bool, nargs="?", const=True, default=default, metavar="true|false", help=help)


def _size(text: str) -> int:
    match = re.fullmatch(r"(\d+)\s*([KMGT]i?)?B?", text.strip(), re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size (e.g. 500Mi, 2Gi): {text!r}")
    unit = (match.group(2) or "").upper().rstrip("I")
    return int(match.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit]


def default_artifacts_dir() -> Path:
    """``$TMPDIR/hybrid-operator-<uid>/runner``: one per user, so that no user runs what another left there.

    Under a shared name, whoever made the dir first (another user, or someone who planted it) would own
    what every later operator runs. This one is checked like any other (``privatedirs``, when the
    executor opens it): if someone else made it, the operator refuses to start and says why.
    """
    return Path(tempfile.gettempdir()) / f"hybrid-operator-{os.geteuid()}" / "runner"


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    a = parser.add_argument
    a("--watches-file", default=env("WATCHES_FILE", "./watches.yaml"), help="watches.yaml to load")
    a(
        "--reconcile-period",
        type=_period,
        default=_period("10h"),
        help="default interval between reconciles of an unchanged object (0 = never; else 1s-8760h)",
    )
    a(
        "--max-concurrent-reconciles",
        type=_positive_int,
        default=CPUS,
        help="reconciles of one kind at once (default: number of CPUs)",
    )
    a(
        "--max-concurrent-reconciles-total",
        type=_positive_int,
        default=None,
        help="reconciles of all kinds at once (default: the per-kind value); operator-sdk has no such cap",
    )
    a("--ansible-verbosity", type=int, default=2, help="ansible-playbook verbosity, 0-7")
    a(
        "--ansible-args",
        type=ansible_args,
        default="",
        help="extra arguments for ansible-playbook; one pair of surrounding single quotes is removed, as "
        "operator-sdk does",
    )
    a("--ansible-roles-path", default="", help="colon-separated roles paths, searched before ./roles")
    a("--ansible-collections-path", default="", help="colon-separated collections paths")
    a(
        "--ansible-log-events",
        type=_log_level,
        default="tasks",
        help="how much of each run to log: tasks (a line per run, failed tasks' output), everything (also a "
        "line per Ansible event) or nothing (the line per run); any case, as operator-sdk's Tasks",
    )
    a(
        "--executor",
        choices=("runner", "warm"),
        default=env("HYBRID_OPERATOR_EXECUTOR", "warm"),
        help="warm (default): every run a fork of a warm Ansible; runner: one ansible-runner process per run "
        "(operator-sdk's way; also used when the installed ansible-core is outside the warm executor's range)",
    )
    _switch(
        parser,
        "--module-server",
        True,
        "run Ansible modules in forks of a warm process instead of a new interpreter per task "
        "(with the warm executor: in forks of Ansible's own worker)",
    )
    a(
        "--ansible-run-timeout",
        type=_duration,
        default=_duration("10m"),
        help="a run longer than this is killed",
    )
    a(
        "--ansible-run-memory",
        type=_size,
        default=_size("512Mi"),
        help="how much memory each process of a run may take on top of what it starts with; past it the "
        "run fails (RunOutOfMemory) and the operator goes on (0: unbounded)",
    )
    a(
        "--runner-artifacts-dir",
        default=str(default_artifacts_dir()),
        help="where each run's private data dir and artifacts live: a directory of this user's with mode 0700 "
        "(created so if missing; the operator refuses to start on one another user could have written)",
    )
    a(
        "--max-artifacts-size",
        type=_size,
        default=_size("1Gi"),
        help="disk budget for all kept artifacts; the oldest runs go first",
    )
    a(
        "--max-object-entries",
        type=_positive_int,
        default=10_000,
        help="entries (mapping items and list elements, at any depth) a watched object may hold; a larger one "
        "is refused with InvalidSpec and only a stub of it is kept in memory",
    )
    a(
        "--run-namespaces",
        choices=("auto", "own", "any"),
        default=env("HYBRID_OPERATOR_RUN_NAMESPACES", "auto"),
        help="where a run's API requests may go through the run proxy: own (its object's namespace, the "
        "watch's runNamespaces and cluster-scoped kinds), any (as operator-sdk), or auto (default: own when "
        "WATCH_NAMESPACE lists several namespaces, any otherwise); multi-tenant installs: own",
    )
    _switch(parser, "--inject-owner-ref", True, "give children the role creates an ownerReference")
    a(
        "--proxy-stream-timeout",
        type=_duration,
        default=_duration("2m"),
        help="how long one request of a run may last through the run proxy: an exec, attach, port-forward, "
        "watch or followed log, or a plain request however slowly it is answered (at most "
        "--ansible-run-timeout; 0: that); each one also ends with its run",
    )
    _switch(
        parser,
        "--proxy-cache-reads",
        False,
        "answer a run's GET of one object (or a plain LIST) of a kind the operator already watches from the "
        "watch's cache instead of the API server; the run's own writes are still read from the API server",
    )
    _switch(parser, "--leader-elect", False, "run only while holding the leader Lease")
    _switch(
        parser,
        "--sharding",
        env("HYBRID_OPERATOR_SHARDING", "").strip().lower() in ("true", "1", "yes", "on"),
        "share the objects among all replicas with the same --leader-election-id and namespace: each holds a "
        "Lease of its own and runs only the objects it owns (no single leader; exclusive with --leader-elect)",
    )
    a(
        "--sharding-lease-duration",
        type=_duration,
        default=_duration("15s"),
        help="how long a silent sharding member still owns its objects (renewed every 2/15 of it, given up "
        "after 2/3 of it without a renew)",
    )
    a("--leader-election-id", default="hybrid-operator", help="name of the leader Lease (with --sharding: the ring)")
    a(
        "--leader-election-namespace",
        default="",
        help="namespace of the Lease (default: the pod's, or default)",
    )
    a(
        "--metrics-bind-address",
        default=env("HYBRID_OPERATOR_METRICS_BIND_ADDRESS", ":8443"),
        help="host:port for Prometheus metrics ('0' disables; also HYBRID_OPERATOR_METRICS_BIND_ADDRESS)",
    )
    _switch(
        parser,
        "--metrics-secure",
        False,
        "serve metrics over HTTPS: a certificate from --metrics-cert-path, else a self-signed one made at start",
    )
    _switch(
        parser,
        "--metrics-require-rbac",
        False,
        "answer /metrics only to callers the API server authenticates (TokenReview) and authorises for "
        "get on the non-resource URL (SubjectAccessReview); needs --metrics-secure",
    )
    a(
        "--metrics-cert-path",
        default="",
        help="directory with the metrics server's certificate and key (a mounted Secret); reloaded when they change",
    )
    a("--metrics-cert-name", default="tls.crt", help="certificate file in --metrics-cert-path")
    a("--metrics-cert-key", default="tls.key", help="key file in --metrics-cert-path")
    a(
        "--user-metrics-bind-address",
        default=env("HYBRID_OPERATOR_USER_METRICS_BIND_ADDRESS", "localhost:5050"),
        help="host:port where roles send custom metrics (operator_sdk.util.osdk_metric; '0' disables); "
        "operator-sdk listens on localhost:5050 and has no flag",
    )
    a(
        "--health-probe-bind-address",
        default=env("HYBRID_OPERATOR_HEALTH_PROBE_BIND_ADDRESS", ":6789"),
        help="host:port for /healthz and /readyz ('0' disables; also HYBRID_OPERATOR_HEALTH_PROBE_BIND_ADDRESS)",
    )
    a(
        "--graceful-shutdown-timeout",
        type=_duration,
        default=_duration("30s"),
        help="on SIGTERM, how long running reconciles may take to finish",
    )
    a("--kubeconfig", default=env("KUBECONFIG"), help="kubeconfig (default: $KUBECONFIG, else in-cluster)")
    a("--log-format", choices=("text", "json"), default=env("LOG_FORMAT", "text"))
    a("--log-level", default=env("LOG_LEVEL", "INFO"))
    # controller-runtime's logger flags, as an operator-sdk Deployment passes them: level and encoder map
    # onto ours (the last one given wins), the rest are accepted and ignored with a warning.
    a("--zap-log-level", dest="log_level", type=_zap_level, default=argparse.SUPPRESS, help="as --log-level")
    a("--zap-encoder", dest="log_format", type=_zap_encoder, default=argparse.SUPPRESS, help="json or console")
    for ignored in ("--zap-devel", "--zap-stacktrace-level", "--zap-time-encoding"):
        a(ignored, action=_Ignored, nargs="?", default=argparse.SUPPRESS, help="accepted, without effect")


@dataclass(frozen=True)
class Config:
    watches_file: Path
    reconcile_period: float
    max_concurrent_reconciles: int
    max_concurrent_total: int
    ansible_verbosity: int
    ansible_args: str
    roles_paths: tuple[Path, ...]
    collections_paths: tuple[Path, ...]
    ansible_log_events: str
    run_timeout: float
    artifacts_dir: Path
    max_artifacts_bytes: int
    inject_owner_ref: bool
    executor: str
    module_server: bool
    leader_elect: bool
    sharding: bool
    sharding_lease_duration: float
    leader_election_id: str
    leader_election_namespace: str
    metrics_address: str
    metrics_secure: bool
    metrics_require_rbac: bool
    metrics_cert_dir: Path | None
    metrics_cert_name: str
    metrics_key_name: str
    health_address: str
    user_metrics_address: str
    graceful_shutdown_timeout: float
    kubeconfig: str | None
    namespaces: tuple[str, ...]  # empty: all namespaces
    proxy_cache_reads: bool = False
    proxy_stream_timeout: float = 120.0  # seconds; math.inf when neither it nor the run's timeout is set
    inventory: Path | None = None  # ANSIBLE_INVENTORY: copied into every run's input dir instead of localhost
    max_object_entries: int = 10_000  # entries a watched object may hold before it is refused and stubbed
    run_memory: int = 512 << 20  # bytes each process of a run may grow by; 0: unbounded
    confine_runs: bool = False  # --run-namespaces resolved: each run may reach its object's namespace only

    @classmethod
    def from_args(cls, args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        if not 0 <= args.ansible_verbosity <= 7:
            raise ConfigError(f"--ansible-verbosity must be 0-7, got {args.ansible_verbosity}")
        if args.metrics_require_rbac and not args.metrics_secure:
            raise ConfigError(
                "--metrics-require-rbac needs --metrics-secure: callers send a bearer token, which must not "
                "cross the network in clear text"
            )
        if args.sharding and args.leader_elect:
            raise ConfigError(
                "--sharding and --leader-elect exclude each other: with sharding every replica works on its "
                "own share of the objects and there is no leader; drop one of them"
            )
        if args.sharding_lease_duration < 1:
            raise ConfigError(f"--sharding-lease-duration must be at least 1s, got {args.sharding_lease_duration}s")
        namespaces = tuple(ns.strip() for ns in env.get("WATCH_NAMESPACE", "").split(",") if ns.strip())
        return cls(
            watches_file=Path(args.watches_file),
            reconcile_period=args.reconcile_period,
            max_concurrent_reconciles=args.max_concurrent_reconciles,
            max_concurrent_total=args.max_concurrent_reconciles_total or args.max_concurrent_reconciles,
            ansible_verbosity=args.ansible_verbosity,
            ansible_args=args.ansible_args,
            roles_paths=tuple(Path(p) for p in args.ansible_roles_path.split(":") if p),
            collections_paths=tuple(Path(p) for p in args.ansible_collections_path.split(":") if p),
            ansible_log_events=args.ansible_log_events,
            run_timeout=args.ansible_run_timeout,
            artifacts_dir=Path(args.runner_artifacts_dir),
            max_artifacts_bytes=args.max_artifacts_size,
            inject_owner_ref=args.inject_owner_ref,
            proxy_cache_reads=args.proxy_cache_reads,
            proxy_stream_timeout=min(args.proxy_stream_timeout or math.inf, args.ansible_run_timeout or math.inf),
            executor=args.executor,
            module_server=args.module_server,
            leader_elect=args.leader_elect,
            sharding=args.sharding,
            sharding_lease_duration=args.sharding_lease_duration,
            leader_election_id=args.leader_election_id,
            leader_election_namespace=args.leader_election_namespace,
            metrics_address=args.metrics_bind_address,
            metrics_secure=args.metrics_secure,
            metrics_require_rbac=args.metrics_require_rbac,
            metrics_cert_dir=Path(args.metrics_cert_path) if args.metrics_cert_path else None,
            metrics_cert_name=args.metrics_cert_name,
            metrics_key_name=args.metrics_cert_key,
            health_address=args.health_probe_bind_address,
            user_metrics_address=args.user_metrics_bind_address,
            graceful_shutdown_timeout=args.graceful_shutdown_timeout,
            kubeconfig=args.kubeconfig,
            namespaces=namespaces,
            inventory=_inventory(env),
            max_object_entries=args.max_object_entries,
            run_memory=args.ansible_run_memory,
            confine_runs=args.run_namespaces == "own" or (args.run_namespaces == "auto" and len(namespaces) > 1),
        )

    def per_kind(self, prefix: str, gvk: GVK, default: int, env: Mapping[str, str] | None = None) -> int:
        """``<PREFIX>_<KIND>_<GROUP>`` from the environment, as operator-sdk reads it."""
        env = os.environ if env is None else env
        name = re.sub(r"[.\-]", "_", f"{prefix}_{gvk.kind}_{gvk.group}".rstrip("_")).upper()
        raw = env.get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError as exc:
            raise ConfigError(f"{name} must be a whole number, got {raw!r}") from exc
        if value < 0:
            raise ConfigError(f"{name} must not be negative, got {value}")
        return value

    def concurrency(self, gvk: GVK) -> int:
        return max(1, self.per_kind("MAX_CONCURRENT_RECONCILES", gvk, self.max_concurrent_reconciles))

    def verbosity(self, gvk: GVK) -> int:
        return self.per_kind("ANSIBLE_VERBOSITY", gvk, self.ansible_verbosity)
