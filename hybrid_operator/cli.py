"""Command line: ``hybrid-operator run`` (and ``check``, ``reconcile``, ``generate``, ``new``, ``create``).

The entry point behind operator.py. ``run`` parses flags (``config``), sets up logging, makes SIGTERM and
SIGINT requests to stop (``lifecycle``), loads watches.yaml (a bad file stops here, naming the entry and
field), builds the probe and metrics servers and the receiver of role metrics (``receiving``), and hands them
to the lifecycle with the operator's parts (``reactor.orchestration``): it starts them in order (waiting for
the leader Lease with ``--leader-elect``), runs until SIGTERM/SIGINT, then stops them in the reverse order
within ``--graceful-shutdown-timeout`` and exits 0. ``reconcile FILE`` is one reconcile without watching
(``reactor.oneshot``); ``generate crds``, ``new`` and ``create api`` work on the project's files
(``project``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from hybrid_operator import logs
from hybrid_operator import metrics as metrics_mod
from hybrid_operator.errors import ConfigError
from hybrid_operator.httpbounds import BoundedServer
from hybrid_operator.lifecycle import Group, Lifecycle
from hybrid_operator.reactor.orchestration import run_operator
from hybrid_operator.serving import health, receiving
from hybrid_operator.serving.metricsauth import gate_for
from hybrid_operator.serving.tlsserving import ServerTLS
from hybrid_operator.settings.config import Config, Serving, add_run_flags, logging_of
from hybrid_operator.settings.watches import load_watches

log = logging.getLogger("hybrid_operator")


def version() -> str:
    try:
        return metadata.version("hybrid-operator")
    except metadata.PackageNotFoundError:
        return "0.0.0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hybrid-operator",
        description="Run a Kubernetes operator written as Ansible roles (operator-sdk's watches.yaml).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="watch the kinds in watches.yaml and reconcile them")
    add_run_flags(run)
    check = sub.add_parser(
        "check",
        help="validate watches.yaml, and warn where its roles hit a pitfall of moving from ansible-core 2.18",
        description="Validate watches.yaml (exit 2 when it is refused), then read the roles and playbooks it names "
        "(and the roles beside it) for what the docs' porting page lists that a role's text shows: one line per "
        "finding, file:line and the page's section. Exit 0 with warnings, 1 with --strict.",
    )
    check.add_argument("--watches-file", default="./watches.yaml")
    check.add_argument("--ansible-roles-path", default="")
    check.add_argument("--strict", action="store_true", help="exit 1 when there is a porting warning")
    once = sub.add_parser(
        "reconcile",
        help="apply the custom resource in FILE and reconcile it once, as `run` would, without watching",
        description="Apply the custom resource in FILE (server-side apply) on the cluster in KUBECONFIG and "
        "reconcile it once through the same executor, extra vars and proxy as `run`; print the run's task lines "
        "and the status written. With --check: a dry-run apply, Ansible's check mode, the status it would write; "
        "nothing changes. Exit 0 on success, 1 on a failed run, 2 on bad input. Takes run's flags (those about "
        "serving probes, metrics and leader election do nothing here).",
    )
    add_run_flags(once)
    once.set_defaults(ansible_verbosity=0)  # the task lines, not Ansible's debugging output
    once.add_argument("file", metavar="FILE", help="a YAML file holding one custom resource")
    once.add_argument("--check", action="store_true", help="change nothing: dry-run apply, Ansible's check mode")
    new = sub.add_parser("new", help="scaffold a new operator project in DIR")
    new.add_argument("directory", metavar="DIR", help="the project's directory (missing or empty); its name names it")
    new.add_argument("--domain", required=True, help="the API groups' domain, e.g. example.com")
    create = sub.add_parser("create", help="add to the project in the current directory")
    create_what = create.add_subparsers(dest="what", required=True)
    api = create_what.add_parser("api", help="a kind: its role, watches.yaml entry, CRD, RBAC, sample, Molecule check")
    api.add_argument("--group", required=True, help="API group without the domain, e.g. cache")
    api.add_argument("--version", required=True, help="API version, e.g. v1alpha1")
    api.add_argument("--kind", required=True, help="kind, UpperCamelCase, e.g. Memcached")
    api.add_argument(
        "--playbook", action="store_true", help="watch a playbook (playbooks/<kind>.yml) that runs the role"
    )
    api.add_argument("--project-dir", default=".", help="the project (default: the current directory)")
    generate = sub.add_parser("generate", help="generate files from the project's roles")
    what = generate.add_subparsers(dest="what", required=True)
    crds = what.add_parser("crds", help="write each watched kind's CRD schema from its role's meta/argument_specs.yml")
    crds.add_argument("--watches-file", default="./watches.yaml")
    crds.add_argument("--ansible-roles-path", default="")
    crds.add_argument("--crds-dir", default=None, help="where the CRDs are (default: deploy/crds beside watches.yaml)")
    crds.add_argument("--check", action="store_true", help="change nothing; exit 1 with a diff if a CRD is out of date")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "check":
        return _check(args)
    if args.command == "generate":
        return _generate_crds(args)
    if args.command == "reconcile":
        return _reconcile_file(args)
    if args.command in ("new", "create"):
        return _scaffold(args)
    logging = logging_of(args)
    logs.setup(logging.format, logging.level)
    for flag in getattr(args, "ignored_flags", []):
        log.warning("%s is accepted for operator-sdk compatibility and has no effect here", flag)
    try:
        return _run(Config.from_args(args))
    except ConfigError as exc:
        log.error("%s", exc)
        return 2


def _check(args: argparse.Namespace) -> int:
    try:
        watches = load_watches(
            Path(args.watches_file), roles_paths=[Path(p) for p in args.ansible_roles_path.split(":") if p]
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for w in watches:
        print(f"{w.gvk}: {w.target.describe()}" + (f", finalizer {w.finalizer.name}" if w.finalizer else ""))
    return _check_porting(watches, Path(args.watches_file), strict=args.strict)


def _check_porting(watches: list[Any], watches_file: Path, *, strict: bool) -> int:
    """The porting warnings (``project.porting``) of the watched roles and playbooks; the exit code."""
    from hybrid_operator.project import porting

    targets = [(w.target.role, w.target.playbook) for w in watches]
    targets += [
        (w.finalizer.target.role, w.finalizer.target.playbook) for w in watches if w.finalizer and w.finalizer.target
    ]
    watch_vars = {name: value for w in watches for name, value in w.vars.items()}
    try:
        findings = porting.check(porting.scope_of(targets, [watches_file.resolve().parent], watch_vars))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    unchecked = [finding for finding in findings if finding.pitfall is None]
    findings = [finding for finding in findings if finding.pitfall is not None]
    shown = findings[: porting.MAX_SHOWN]
    for finding in shown:
        print(finding.render())
    for note in unchecked[:5]:  # a template under tasks/ that a role renders with lookup: not YAML
        print(f"note: {note.render()}", file=sys.stderr)
    if len(unchecked) > 5:
        print(f"note: {len(unchecked) - 5} more files not checked", file=sys.stderr)
    if findings:
        more = f" ({len(findings) - len(shown)} not shown)" if len(findings) > len(shown) else ""
        print(
            f"{len(findings)} place(s){more} a role may not do what it means (on ansible-core 2.19+, or with a "
            f"spec key of that name): see {porting.PAGE}",
            file=sys.stderr,
        )
    return 1 if findings and strict else 0


def _reconcile_file(args: argparse.Namespace) -> int:
    """``reconcile FILE``: task lines as they come, then the status; exit 0, 1 (failed run) or 2 (bad input)."""
    import yaml

    from hybrid_operator.reactor import oneshot

    logging = logging_of(args)
    logs.setup(logging.format, "WARNING" if logging.level == "INFO" else logging.level)
    try:
        config = Config.from_args(args)
        obj = oneshot.load_object(Path(args.file))  # the input first: bad input costs no watches.yaml read
        watches = load_watches(config.watching.watches_file, roles_paths=config.runs.roles_paths)
        receiver = _role_metrics_receiver("127.0.0.1:0")  # a role's osdk_metric succeeds; the numbers go nowhere
        if receiver is not None:
            receiver.start()
        try:
            once = oneshot.reconcile_once(config, watches, obj, check=args.check, on_event=_print_task_lines)
        finally:
            if receiver is not None:
                receiver.stop()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if once.status or once.code != 2:
        print("\n" + ("status it would write" if args.check else "status") + ":")
        print(yaml.safe_dump(once.status, sort_keys=False, width=120).rstrip() if once.status else "{}")
    if once.message:
        print(("error: " if once.code else "") + once.message, file=sys.stderr if once.code else sys.stdout)
    return once.code


def _print_task_lines(event: dict[str, Any]) -> None:
    text = str(event.get("stdout") or "").replace("\r\n", "\n").strip("\n")
    if text:
        print(text, flush=True)


def _scaffold(args: argparse.Namespace) -> int:
    from hybrid_operator.ansible.reserved import reserved_names
    from hybrid_operator.project import scaffolding

    try:
        if args.command == "new":
            written = scaffolding.new_project(Path(args.directory), args.domain)
            after = (
                f"cd {args.directory} && hybrid-operator create api --group <group> --version v1alpha1 --kind <Kind>"
            )
        else:
            written = scaffolding.create_api(
                Path(args.project_dir),
                group=args.group,
                version=args.version,
                kind=args.kind,
                playbook=args.playbook,
                reserved=reserved_names,
            )
            after = "make install && make run   # then, in another shell: kubectl apply -k deploy/samples"
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    print(f"next: {after}")
    return 0


def _generate_crds(args: argparse.Namespace) -> int:
    """``generate crds``: 0 when nothing changed (or, with --check, nothing would), 1 with --check and a diff."""
    from hybrid_operator.ansible.reserved import reserved_names
    from hybrid_operator.project import crds

    try:
        changes = crds.generate(
            Path(args.watches_file),
            crds_dir=Path(args.crds_dir) if args.crds_dir else None,
            roles_paths=tuple(Path(p) for p in args.ansible_roles_path.split(":") if p),
            reserved=reserved_names,
            note=lambda text: print(text, file=sys.stderr),
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for change in changes:
            sys.stdout.write(change.diff())
        if changes:
            print("CRDs out of date: run `hybrid-operator generate crds`", file=sys.stderr)
        return 1 if changes else 0
    crds.write(changes)
    for change in changes:
        print(f"{'updated' if change.before else 'created'} {change.path}")
    return 0


def _run(config: Config) -> int:
    probes = health.Probes()
    with Lifecycle(config.reconciles.graceful_shutdown_timeout, probes.ready) as lifecycle:
        lifecycle.record_signals()  # from here on SIGTERM and SIGINT only ask the lifecycle to stop
        watches = load_watches(config.watching.watches_file, roles_paths=config.runs.roles_paths)
        metrics_mod.set_build_info(version(), _ansible_version())
        servers = [
            ("health probes", health.server(config.serving.health_address, probes, metrics=False)),
            ("metrics", _metrics_server(config.serving, config.watching.kubeconfig, probes)),
            ("role metrics receiver", _role_metrics_receiver(config.serving.user_metrics_address)),
        ]
        for name, server in servers:
            if server is not None:
                lifecycle.add(Group.SERVERS, name, server)
        return run_operator(config, watches, probes, lifecycle)


def _metrics_server(serving: Serving, kubeconfig: str | None, probes: health.Probes) -> BoundedServer | None:
    """/metrics as --metrics-secure and --metrics-require-rbac ask: plain, HTTPS, or HTTPS for allowed callers."""
    tls: ServerTLS | None = None
    if serving.metrics_secure:
        if serving.metrics_cert_dir is not None:
            tls = ServerTLS.from_dir(serving.metrics_cert_dir, serving.metrics_cert_name, serving.metrics_key_name)
        else:
            tls = ServerTLS()
    gate = gate_for(kubeconfig) if serving.metrics_require_rbac else None
    return health.server(serving.metrics_address, None, metrics=True, tls=tls, gate=gate, scraped=probes.publish)


def _role_metrics_receiver(address: str) -> BoundedServer | None:
    """The receiver for osdk_metric, bound; every run is told where it is (runs inherit our environment).

    A busy port is not fatal, unlike upstream: role metrics are an extra, reconciling is the job. Runs are
    then told the receiver is off, so their osdk_metric fails with that reason instead of reaching
    whichever process holds the port.
    """
    try:
        server = receiving.server(address)
    except OSError as exc:
        log.error("role metrics are off: cannot listen on %s (--user-metrics-bind-address): %s", address, exc)
        server = None
    os.environ[receiving.URL_ENV] = receiving.url(server) if server is not None else ""
    os.environ[receiving.TOKEN_ENV] = server.token if isinstance(server, receiving.Receiver) else ""
    return server


def _ansible_version() -> str:
    try:
        return metadata.version("ansible-core")
    except metadata.PackageNotFoundError:
        return "unknown"
