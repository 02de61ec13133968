"""The flags of ``run`` and ``reconcile FILE``: operator-sdk's names and environment, in groups by concern.

``cli`` builds its parser with ``add_run_flags``; ``config.Config.from_args`` turns what it parsed into
the settings of each group. The groups are ``Config``'s own (watching, reconciles, runs, proxy, election,
serving, logging), and ``--help`` shows the flags under them. Every name an operator-sdk Deployment passes
is accepted, and reads as Go's flag package reads it; the parsers below refuse a bad value with argparse's
usage line naming the flag.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hybrid_operator import eventlog
from hybrid_operator.settings.durations import parse_duration, parse_period

CPUS = max(1, os.cpu_count() or 1)

# (title, what it is about): --help's groups, in this order; the titles are Config's attributes.
GROUPS = (
    ("watching", "what the operator watches, and where (WATCH_NAMESPACE: the namespaces, comma-separated; none: all)"),
    (
        "reconciles",
        "how many reconciles at once (MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP> for one kind), and how long a stop "
        "waits for them",
    ),
    (
        "runs",
        "how each reconcile runs Ansible (ANSIBLE_VERBOSITY_<KIND>_<GROUP> for one kind; ANSIBLE_INVENTORY: an "
        "inventory instead of localhost)",
    ),
    ("proxy", "the API proxy every run talks to the API server through"),
    ("election", "leader election, or sharding the objects among replicas"),
    ("serving", "the probes, the metrics and the receiver of role metrics"),
    ("logging", "what the operator's log looks like"),
)


# -- values --------------------------------------------------------------------------------------------


def _refusing(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` with its ValueError told as argparse tells a bad value (naming the flag)."""

    def parsed(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return parsed


duration = _refusing(parse_duration)
period = _refusing(parse_period)  # a reconcile period, bounded as watches.yaml's (0, or 1s-8760h)
log_events = _refusing(eventlog.parse_level)


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


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def size(text: str) -> int:
    """Bytes from a Kubernetes-style size: 1024, 10K, 500Mi, 2Gi, 3MB."""
    match = re.fullmatch(r"(\d+)\s*([KMGT]i?)?B?", text.strip(), re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size (e.g. 500Mi, 2Gi): {text!r}")
    unit = (match.group(2) or "").upper().rstrip("I")
    return int(match.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit]


def zap_level(text: str) -> str:
    """controller-runtime's --zap-log-level: debug, info, error, panic, or a verbosity number (> 0 is debug)."""
    lowered = text.strip().lower()
    named = {"debug": "DEBUG", "info": "INFO", "warn": "WARNING", "error": "ERROR", "dpanic": "CRITICAL"}
    named["panic"] = named["fatal"] = "CRITICAL"
    if lowered in named:
        return named[lowered]
    if lowered.isdigit():
        return "DEBUG" if int(lowered) > 0 else "INFO"
    raise argparse.ArgumentTypeError(f"expected debug, info, error, panic or a number, got {text!r}")


def zap_encoder(text: str) -> str:
    """controller-runtime's --zap-encoder: json, or console (our text format)."""
    lowered = text.strip().lower()
    if lowered not in ("json", "console"):
        raise argparse.ArgumentTypeError(f"expected json or console, got {text!r}")
    return "json" if lowered == "json" else "text"


def default_artifacts_dir() -> Path:
    """``$TMPDIR/hybrid-operator-<uid>/runner``: one per user, so that no user runs what another left there.

    Under a shared name, whoever made the dir first (another user, or someone who planted it) would own
    what every later operator runs. This one is checked like any other (``privatedirs``, when the
    executor opens it): if someone else made it, the operator refuses to start and says why.
    """
    return Path(tempfile.gettempdir()) / f"hybrid-operator-{os.geteuid()}" / "runner"


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


# -- the flags, group by group -------------------------------------------------------------------------

Group = argparse._ArgumentGroup  # what add_argument_group returns (argparse names no public type for it)


def _switch(group: Group, name: str, default: bool, help: str) -> None:
    """A boolean flag as Go's flag package reads one: ``--name``, ``--name=true``, ``--name=false``."""
    group.add_argument(name, type=boolean, nargs="?", const=True, default=default, metavar="true|false", help=help)


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    groups = {title: parser.add_argument_group(title, about) for title, about in GROUPS}
    _watching(groups["watching"])
    _reconciles(groups["reconciles"])
    _runs(groups["runs"])
    _proxy(groups["proxy"])
    _election(groups["election"])
    _serving(groups["serving"])
    _logging(groups["logging"])


def _watching(g: Group) -> None:
    env = os.environ.get
    g.add_argument("--watches-file", default=env("WATCHES_FILE", "./watches.yaml"), help="watches.yaml to load")
    g.add_argument("--kubeconfig", default=env("KUBECONFIG"), help="kubeconfig (default: $KUBECONFIG, else in-cluster)")
    g.add_argument(
        "--reconcile-period",
        type=period,
        default=period("10h"),
        help="default interval between reconciles of an unchanged object (0 = never; else 1s-8760h)",
    )
    g.add_argument(
        "--max-object-entries",
        type=positive_int,
        default=10_000,
        help="entries (mapping items and list elements, at any depth) a watched object may hold; a larger one "
        "is refused with InvalidSpec and only a stub of it is kept in memory",
    )


def _reconciles(g: Group) -> None:
    g.add_argument(
        "--max-concurrent-reconciles",
        type=positive_int,
        default=CPUS,
        help="reconciles of one kind at once (default: number of CPUs)",
    )
    g.add_argument(
        "--max-concurrent-reconciles-total",
        type=positive_int,
        default=None,
        help="reconciles of all kinds at once (default: the per-kind value); operator-sdk has no such cap",
    )
    g.add_argument(
        "--graceful-shutdown-timeout",
        type=duration,
        default=duration("30s"),
        help="on SIGTERM or SIGINT, how long running reconciles may take to finish, and the rest to stop",
    )


def _runs(g: Group) -> None:
    g.add_argument(
        "--executor",
        choices=("runner", "warm"),
        default=os.environ.get("HYBRID_OPERATOR_EXECUTOR", "warm"),
        help="warm (default): every run a fork of a warm Ansible; runner: one ansible-runner process per run "
        "(operator-sdk's way; also used when the installed ansible-core is outside the warm executor's range)",
    )
    _switch(
        g,
        "--module-server",
        True,
        "run Ansible modules in forks of a warm process instead of a new interpreter per task "
        "(with the warm executor: in forks of Ansible's own worker)",
    )
    g.add_argument("--ansible-verbosity", type=int, default=2, help="ansible-playbook verbosity, 0-7")
    g.add_argument(
        "--ansible-args",
        type=ansible_args,
        default="",
        help="extra arguments for ansible-playbook; one pair of surrounding single quotes is removed, as "
        "operator-sdk does",
    )
    g.add_argument("--ansible-roles-path", default="", help="colon-separated roles paths, searched before ./roles")
    g.add_argument("--ansible-collections-path", default="", help="colon-separated collections paths")
    g.add_argument(
        "--ansible-run-timeout", type=duration, default=duration("10m"), help="a run longer than this is killed"
    )
    g.add_argument(
        "--ansible-run-memory",
        type=size,
        default=size("512Mi"),
        help="how much memory each process of a run may take on top of what it starts with; past it the "
        "run fails (RunOutOfMemory) and the operator goes on (0: unbounded)",
    )
    g.add_argument(
        "--runner-artifacts-dir",
        default=str(default_artifacts_dir()),
        help="where each run's private data dir and artifacts live: a directory of this user's with mode 0700 "
        "(created so if missing; the operator refuses to start on one another user could have written)",
    )
    g.add_argument(
        "--max-artifacts-size",
        type=size,
        default=size("1Gi"),
        help="disk budget for all kept artifacts; the oldest runs go first",
    )


def _proxy(g: Group) -> None:
    _switch(g, "--inject-owner-ref", True, "give children the role creates an ownerReference")
    g.add_argument(
        "--run-namespaces",
        choices=("auto", "own", "any"),
        default=os.environ.get("HYBRID_OPERATOR_RUN_NAMESPACES", "auto"),
        help="where a run's API requests may go through the run proxy: own (its object's namespace, the "
        "watch's runNamespaces and cluster-scoped kinds), any (as operator-sdk), or auto (default: own when "
        "WATCH_NAMESPACE lists several namespaces, any otherwise); multi-tenant installs: own",
    )
    g.add_argument(
        "--proxy-stream-timeout",
        type=duration,
        default=duration("2m"),
        help="how long one request of a run may last through the run proxy: an exec, attach, port-forward, "
        "watch or followed log, or a plain request however slowly it is answered (at most "
        "--ansible-run-timeout; 0: that); each one also ends with its run",
    )
    _switch(
        g,
        "--proxy-cache-reads",
        False,
        "answer a run's GET of one object (or a plain LIST) of a kind the operator already watches from the "
        "watch's cache instead of the API server; the run's own writes are still read from the API server",
    )


def _election(g: Group) -> None:
    _switch(g, "--leader-elect", False, "run only while holding the leader Lease")
    g.add_argument(
        "--leader-election-id", default="hybrid-operator", help="name of the leader Lease (with --sharding: the ring)"
    )
    g.add_argument(
        "--leader-election-namespace", default="", help="namespace of the Lease (default: the pod's, or default)"
    )
    _switch(
        g,
        "--sharding",
        os.environ.get("HYBRID_OPERATOR_SHARDING", "").strip().lower() in ("true", "1", "yes", "on"),
        "share the objects among all replicas with the same --leader-election-id and namespace: each holds a "
        "Lease of its own and runs only the objects it owns (no single leader; exclusive with --leader-elect)",
    )
    g.add_argument(
        "--sharding-lease-duration",
        type=duration,
        default=duration("15s"),
        help="how long a silent sharding member still owns its objects (renewed every 2/15 of it, given up "
        "after 2/3 of it without a renew)",
    )


def _serving(g: Group) -> None:
    env = os.environ.get
    g.add_argument(
        "--health-probe-bind-address",
        default=env("HYBRID_OPERATOR_HEALTH_PROBE_BIND_ADDRESS", ":6789"),
        help="host:port for /healthz and /readyz ('0' disables; also HYBRID_OPERATOR_HEALTH_PROBE_BIND_ADDRESS)",
    )
    g.add_argument(
        "--metrics-bind-address",
        default=env("HYBRID_OPERATOR_METRICS_BIND_ADDRESS", ":8443"),
        help="host:port for Prometheus metrics ('0' disables; also HYBRID_OPERATOR_METRICS_BIND_ADDRESS)",
    )
    _switch(
        g,
        "--metrics-secure",
        False,
        "serve metrics over HTTPS: a certificate from --metrics-cert-path, else a self-signed one made at start",
    )
    _switch(
        g,
        "--metrics-require-rbac",
        False,
        "answer /metrics only to callers the API server authenticates (TokenReview) and authorises for "
        "get on the non-resource URL (SubjectAccessReview); needs --metrics-secure",
    )
    g.add_argument(
        "--metrics-cert-path",
        default="",
        help="directory with the metrics server's certificate and key (a mounted Secret); reloaded when they change",
    )
    g.add_argument("--metrics-cert-name", default="tls.crt", help="certificate file in --metrics-cert-path")
    g.add_argument("--metrics-cert-key", default="tls.key", help="key file in --metrics-cert-path")
    g.add_argument(
        "--user-metrics-bind-address",
        default=env("HYBRID_OPERATOR_USER_METRICS_BIND_ADDRESS", "localhost:5050"),
        help="host:port where roles send custom metrics (operator_sdk.util.osdk_metric; '0' disables); "
        "operator-sdk listens on localhost:5050 and has no flag",
    )


def _logging(g: Group) -> None:
    env = os.environ.get
    g.add_argument("--log-format", choices=("text", "json"), default=env("LOG_FORMAT", "text"))
    g.add_argument("--log-level", default=env("LOG_LEVEL", "INFO"))
    g.add_argument(
        "--ansible-log-events",
        type=log_events,
        default="tasks",
        help="how much of each run to log: tasks (a line per run, failed tasks' output), everything (also a "
        "line per Ansible event) or nothing (the line per run); any case, as operator-sdk's Tasks",
    )
    # controller-runtime's logger flags, as an operator-sdk Deployment passes them: level and encoder map
    # onto ours (the last one given wins), the rest are accepted and ignored with a warning.
    g.add_argument(
        "--zap-log-level", dest="log_level", type=zap_level, default=argparse.SUPPRESS, help="as --log-level"
    )
    g.add_argument(
        "--zap-encoder", dest="log_format", type=zap_encoder, default=argparse.SUPPRESS, help="json or console"
    )
    for ignored in ("--zap-devel", "--zap-stacktrace-level", "--zap-time-encoding"):
        g.add_argument(ignored, action=_Ignored, nargs="?", default=argparse.SUPPRESS, help="accepted, without effect")
