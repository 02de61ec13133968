"""Flags and environment: operator-sdk's names, parsed once into a typed ``Config``.

``cli`` builds the parser and calls ``from_args``; the reactor reads the result. Per-kind overrides come
from the environment as upstream names them: ``MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>`` and
``ANSIBLE_VERBOSITY_<KIND>_<GROUP>`` (upper case, dots and dashes to underscores).
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hybrid_operator.durations import parse_duration
from hybrid_operator.errors import ConfigError
from hybrid_operator.watches import GVK

CPUS = max(1, os.cpu_count() or 1)


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
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
        type=_duration,
        default=_duration("10h"),
        help="default interval between reconciles of an unchanged object (0 = never)",
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
    a("--ansible-args", default="", help="extra arguments for ansible-playbook")
    a("--ansible-roles-path", default="", help="colon-separated roles paths, searched before ./roles")
    a("--ansible-collections-path", default="", help="colon-separated collections paths")
    a(
        "--ansible-log-events",
        choices=("tasks", "everything", "nothing"),
        default="tasks",
        help="how much of each run to log",
    )
    a(
        "--executor",
        choices=("runner", "warm"),
        default=env("HYBRID_OPERATOR_EXECUTOR", "warm"),
        help="warm (default): every run a fork of a warm Ansible; runner: one ansible-runner process per run "
        "(operator-sdk's way; also used when the installed ansible-core is outside the warm executor's range)",
    )
    a(
        "--module-server",
        type=_bool,
        default=True,
        help="run Ansible modules in forks of a warm process instead of a new interpreter per task "
        "(with the warm executor: in forks of Ansible's own worker)",
    )
    a(
        "--ansible-run-timeout",
        type=_duration,
        default=_duration("10m"),
        help="a run longer than this is killed",
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
    a("--inject-owner-ref", type=_bool, default=True, help="give children the role creates an ownerReference")
    a("--leader-elect", action="store_true", help="run only while holding the leader Lease")
    a("--leader-election-id", default="hybrid-operator", help="name of the leader Lease")
    a(
        "--leader-election-namespace",
        default="",
        help="namespace of the Lease (default: the pod's, or default)",
    )
    a("--metrics-bind-address", default=":8443", help="host:port for Prometheus metrics ('0' disables)")
    a(
        "--user-metrics-bind-address",
        default=env("HYBRID_OPERATOR_USER_METRICS_BIND_ADDRESS", "localhost:5050"),
        help="host:port where roles send custom metrics (operator_sdk.util.osdk_metric; '0' disables); "
        "operator-sdk listens on localhost:5050 and has no flag",
    )
    a(
        "--health-probe-bind-address",
        default=":6789",
        help="host:port for /healthz and /readyz ('0' disables)",
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
    leader_election_id: str
    leader_election_namespace: str
    metrics_address: str
    health_address: str
    user_metrics_address: str
    graceful_shutdown_timeout: float
    kubeconfig: str | None
    namespaces: tuple[str, ...]  # empty: all namespaces

    @classmethod
    def from_args(cls, args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        if not 0 <= args.ansible_verbosity <= 7:
            raise ConfigError(f"--ansible-verbosity must be 0-7, got {args.ansible_verbosity}")
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
            executor=args.executor,
            module_server=args.module_server,
            leader_elect=args.leader_elect,
            leader_election_id=args.leader_election_id,
            leader_election_namespace=args.leader_election_namespace,
            metrics_address=args.metrics_bind_address,
            health_address=args.health_probe_bind_address,
            user_metrics_address=args.user_metrics_bind_address,
            graceful_shutdown_timeout=args.graceful_shutdown_timeout,
            kubeconfig=args.kubeconfig,
            namespaces=namespaces,
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
