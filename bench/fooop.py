"""The working tree's operator on a namespace of its own, watching ``roles/foo``: what the Foo bench tools
(``bench.apirequests``, ``bench.createtrace``) start before they create Foos.

Where it sits: below those tools, beside ``bench.cluster``. ``start`` installs the Foo CRD, makes the
namespace (labelled with the run's id, so ``python -m bench --cleanup`` finds it), writes a watches.yaml for
``roles/foo`` with ``watchDependentStatusChanges`` (as P1 runs it) and starts ``hybrid-operator run`` in a
session of its own, its log in the work dir; ``stop`` ends it and deletes the namespace without waiting;
``remove`` deletes the work dir once the tool has read the log (a tool that failed keeps it, and says where).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench.cluster import FOO, Cluster

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class FooOperator:
    """A started operator: its bed, namespace, work dir (watches.yaml, log, artifacts) and process."""

    cluster: Cluster
    namespace: str
    work: Path
    process: subprocess.Popen[bytes]

    @property
    def log(self) -> Path:
        return self.work / "operator.log"

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(60)
        self.cluster.delete_namespaces([self.namespace], timeout=0)

    def remove(self) -> None:
        """The work dir, its artifacts and log: gone (after ``stop``)."""
        shutil.rmtree(self.work, ignore_errors=True)


def operator_arguments(parser: argparse.ArgumentParser) -> None:
    """The tools' shared flags: ``--kubeconfig`` and, after ``--``, extra flags for ``hybrid-operator run``."""
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="default: $KUBECONFIG")
    parser.add_argument("operator_args", nargs="*", help="after --: extra flags for hybrid-operator run")


def parsed(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``argv`` parsed; an error (exit 2) without a kubeconfig."""
    args = parser.parse_args(argv)
    if not args.kubeconfig:
        parser.error("set KUBECONFIG or --kubeconfig (hack/local-cluster.sh up prints it)")
    return args


def start(kubeconfig: str, prefix: str, operator_args: list[str]) -> FooOperator:
    """The operator on a new namespace ``<prefix>-<run id>``, with ``operator_args`` added to its flags."""
    cluster = Cluster(kubeconfig)
    cluster.ensure_crds([ROOT / "deploy" / "crds" / "foo.yaml"])
    run_id = uuid.uuid4().hex[:6]
    namespace = f"{prefix}-{run_id}"
    cluster.create_namespace(namespace, run_id)
    work = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    watches = work / "watches.yaml"
    watches.write_text(
        f"- version: {FOO.version}\n  group: {FOO.group}\n  kind: {FOO.kind}\n"
        f"  role: {ROOT / 'roles' / 'foo'}\n  watchDependentStatusChanges: true\n",
        encoding="utf-8",
    )
    command = [
        sys.executable, "-m", "hybrid_operator", "run", "--watches-file", str(watches),
        "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0",
        "--runner-artifacts-dir", str(work / "artifacts"), *operator_args,
    ]  # fmt: skip
    env = {**os.environ, "WATCH_NAMESPACE": namespace, "KUBECONFIG": kubeconfig}
    with open(work / "operator.log", "wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return FooOperator(cluster, namespace, work, process)
