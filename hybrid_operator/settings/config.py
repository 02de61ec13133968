"""What ``run`` and ``reconcile FILE`` are told, parsed once into a typed ``Config`` of groups by concern.

``cli`` builds the parser (``flags.add_run_flags``: operator-sdk's flag names and environment variables,
under the same groups in ``--help``) and calls ``Config.from_args``; every reader takes the group it
needs: the reactor ``watching``, ``reconciles``, ``election``; the executor ``runs``; the run proxy
``proxy``; ``cli`` ``serving`` and ``logging``. Each group is parsed by a small function of its own, which
refuses what cannot work together with a ``ConfigError`` naming the flags. Per-kind overrides come from
the environment as upstream names them: ``MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>`` and
``ANSIBLE_VERBOSITY_<KIND>_<GROUP>`` (upper case, dots and dashes to underscores).
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hybrid_operator.errors import ConfigError
from hybrid_operator.kube.objects import GVK
from hybrid_operator.settings.flags import add_run_flags

__all__ = ["Config", "add_run_flags", "per_kind"]


@dataclass(frozen=True)
class Watching:
    """What the operator watches, and where."""

    watches_file: Path
    """watches.yaml: the kinds and what reconciles them (``--watches-file``, ``WATCHES_FILE``)."""
    kubeconfig: str | None
    """The cluster (``--kubeconfig``, ``KUBECONFIG``); None: in-cluster."""
    namespaces: tuple[str, ...]
    """The namespaces watched (``WATCH_NAMESPACE``, comma-separated); empty: all of them."""
    reconcile_period: float
    """Seconds between reconciles of an unchanged object, unless its watch says (``--reconcile-period``); 0: never."""
    max_object_entries: int
    """Entries a watched object may hold before it is refused and only a stub of it is kept."""


@dataclass(frozen=True)
class Reconciles:
    """How many reconciles at once, and how long a stop waits for them."""

    max_concurrent_reconciles: int
    """Reconciles of one kind at once, unless ``MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>`` says (``concurrency``)."""
    max_concurrent_total: int
    """Reconciles of all kinds at once (``--max-concurrent-reconciles-total``; default: the per-kind value)."""
    graceful_shutdown_timeout: float
    """Seconds a stop lets running reconciles finish, and everything else stop, before the process exits."""

    def concurrency(self, gvk: GVK, env: Mapping[str, str] | None = None) -> int:
        return max(1, per_kind("MAX_CONCURRENT_RECONCILES", gvk, self.max_concurrent_reconciles, env))


@dataclass(frozen=True)
class Runs:
    """How each reconcile runs Ansible."""

    executor: str
    """``warm`` (every run a fork of a warm Ansible) or ``runner`` (one ansible-runner process per run)."""
    module_server: bool
    """Modules in forks of a warm process instead of a new interpreter per task."""
    verbosity: int
    """ansible-playbook's verbosity, 0-7, unless ``ANSIBLE_VERBOSITY_<KIND>_<GROUP>`` says (``verbosity_of``)."""
    ansible_args: str
    """Extra arguments for ansible-playbook, one pair of surrounding single quotes removed."""
    roles_paths: tuple[Path, ...]
    """Searched for roles before the project's ``roles/``."""
    collections_paths: tuple[Path, ...]
    """Searched for collections before the defaults."""
    inventory: Path | None
    """``ANSIBLE_INVENTORY``: copied into every run instead of the ``localhost`` one."""
    timeout: float
    """Seconds a run may take before it is killed (``--ansible-run-timeout``); 0: no limit."""
    memory: int
    """Bytes each process of a run may grow by (``--ansible-run-memory``); 0: unbounded."""
    artifacts_dir: Path
    """Where each run's private data dir and artifacts live (``--runner-artifacts-dir``)."""
    max_artifacts_bytes: int
    """The disk budget of all kept artifacts; the oldest runs go first."""

    def verbosity_of(self, gvk: GVK, env: Mapping[str, str] | None = None) -> int:
        return per_kind("ANSIBLE_VERBOSITY", gvk, self.verbosity, env)


@dataclass(frozen=True)
class Proxy:
    """The API proxy every run talks to the API server through."""

    inject_owner_ref: bool
    """Give the children a role creates an ownerReference to their owner."""
    confine_runs: bool
    """Each run may reach its object's namespace only (``--run-namespaces`` resolved)."""
    stream_timeout: float
    """Seconds one request of a run may last through the proxy; ``math.inf``: until the run ends."""
    cache_reads: bool
    """Answer a run's reads of watched kinds from the informers' caches."""


@dataclass(frozen=True)
class Election:
    """Leader election, or sharding the objects among replicas."""

    leader_elect: bool
    """Run only while holding the leader Lease."""
    lease_name: str
    """The leader Lease's name (``--leader-election-id``); with ``sharding``, the ring's."""
    lease_namespace: str
    """The Lease's namespace (``--leader-election-namespace``); empty: the pod's, or default."""
    sharding: bool
    """Share the objects among all replicas of the same ring, each running only its own."""
    sharding_lease_duration: float
    """Seconds a silent member of the ring still owns its objects."""


@dataclass(frozen=True)
class Serving:
    """The probes, the metrics and the receiver of role metrics."""

    health_address: str
    """host:port of /healthz and /readyz; '0': none."""
    metrics_address: str
    """host:port of /metrics; '0': none."""
    metrics_secure: bool
    """Serve /metrics over HTTPS."""
    metrics_require_rbac: bool
    """Answer /metrics only to callers the API server authenticates and allows."""
    metrics_cert_dir: Path | None
    """The metrics server's certificate and key (``--metrics-cert-path``); None: a self-signed one."""
    metrics_cert_name: str
    """The certificate's file in ``metrics_cert_dir``."""
    metrics_key_name: str
    """The key's file in ``metrics_cert_dir``."""
    user_metrics_address: str
    """host:port where roles send their metrics (``osdk_metric``); '0': none."""


@dataclass(frozen=True)
class Logging:
    """What the operator's log looks like."""

    format: str
    """``text`` or ``json`` (``--log-format``, ``--zap-encoder``)."""
    level: str
    """The logging level's name (``--log-level``, ``--zap-log-level``)."""
    run_events: str
    """How much of each run is logged (``--ansible-log-events``): tasks, everything or nothing."""


@dataclass(frozen=True)
class Config:
    """Everything ``run`` was told, by concern; each field one of the groups of ``--help``."""

    watching: Watching
    reconciles: Reconciles
    runs: Runs
    proxy: Proxy
    election: Election
    serving: Serving
    logging: Logging

    @classmethod
    def from_args(cls, args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        watching = _watching(args, env)
        return cls(
            watching=watching,
            reconciles=_reconciles(args),
            runs=_runs(args, env),
            proxy=_proxy(args, watching.namespaces),
            election=_election(args),
            serving=_serving(args),
            logging=logging_of(args),
        )


def _watching(args: argparse.Namespace, env: Mapping[str, str]) -> Watching:
    return Watching(
        watches_file=Path(args.watches_file),
        kubeconfig=args.kubeconfig,
        namespaces=tuple(ns.strip() for ns in env.get("WATCH_NAMESPACE", "").split(",") if ns.strip()),
        reconcile_period=args.reconcile_period,
        max_object_entries=args.max_object_entries,
    )


def _reconciles(args: argparse.Namespace) -> Reconciles:
    return Reconciles(
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        max_concurrent_total=args.max_concurrent_reconciles_total or args.max_concurrent_reconciles,
        graceful_shutdown_timeout=args.graceful_shutdown_timeout,
    )


def _runs(args: argparse.Namespace, env: Mapping[str, str]) -> Runs:
    if not 0 <= args.ansible_verbosity <= 7:
        raise ConfigError(f"--ansible-verbosity must be 0-7, got {args.ansible_verbosity}")
    return Runs(
        executor=args.executor,
        module_server=args.module_server,
        verbosity=args.ansible_verbosity,
        ansible_args=args.ansible_args,
        roles_paths=_paths(args.ansible_roles_path),
        collections_paths=_paths(args.ansible_collections_path),
        inventory=_inventory(env),
        timeout=args.ansible_run_timeout,
        memory=args.ansible_run_memory,
        artifacts_dir=Path(args.runner_artifacts_dir),
        max_artifacts_bytes=args.max_artifacts_size,
    )


def _proxy(args: argparse.Namespace, namespaces: tuple[str, ...]) -> Proxy:
    return Proxy(
        inject_owner_ref=args.inject_owner_ref,
        # auto: an operator serving a list of tenants' namespaces confines each run to its object's
        confine_runs=args.run_namespaces == "own" or (args.run_namespaces == "auto" and len(namespaces) > 1),
        stream_timeout=min(args.proxy_stream_timeout or math.inf, args.ansible_run_timeout or math.inf),
        cache_reads=args.proxy_cache_reads,
    )


def _election(args: argparse.Namespace) -> Election:
    if args.sharding and args.leader_elect:
        raise ConfigError(
            "--sharding and --leader-elect exclude each other: with sharding every replica works on its "
            "own share of the objects and there is no leader; drop one of them"
        )
    if args.sharding_lease_duration < 1:
        raise ConfigError(f"--sharding-lease-duration must be at least 1s, got {args.sharding_lease_duration}s")
    return Election(
        leader_elect=args.leader_elect,
        lease_name=args.leader_election_id,
        lease_namespace=args.leader_election_namespace,
        sharding=args.sharding,
        sharding_lease_duration=args.sharding_lease_duration,
    )


def _serving(args: argparse.Namespace) -> Serving:
    if args.metrics_require_rbac and not args.metrics_secure:
        raise ConfigError(
            "--metrics-require-rbac needs --metrics-secure: callers send a bearer token, which must not "
            "cross the network in clear text"
        )
    return Serving(
        health_address=args.health_probe_bind_address,
        metrics_address=args.metrics_bind_address,
        metrics_secure=args.metrics_secure,
        metrics_require_rbac=args.metrics_require_rbac,
        metrics_cert_dir=Path(args.metrics_cert_path) if args.metrics_cert_path else None,
        metrics_cert_name=args.metrics_cert_name,
        metrics_key_name=args.metrics_cert_key,
        user_metrics_address=args.user_metrics_bind_address,
    )


def logging_of(args: argparse.Namespace) -> Logging:
    """The logging group alone: ``cli`` sets the log up with it before the rest is parsed (and may fail)."""
    return Logging(format=args.log_format, level=args.log_level, run_events=args.ansible_log_events)


def _paths(text: str) -> tuple[Path, ...]:
    return tuple(Path(p) for p in text.split(":") if p)


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


def per_kind(prefix: str, gvk: GVK, default: int, env: Mapping[str, str] | None = None) -> int:
    """``<PREFIX>_<KIND>_<GROUP>`` from the environment, as operator-sdk reads it; else ``default``."""
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
