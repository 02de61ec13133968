"""Faults on the real test bed: what the operator does, measured.

Each test drives one fault against the real API server and asserts the recovery the README's
Reliability table quotes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from tests.integration.conftest import ROOT, Objects, condition, wait_until
from tests.integration.faults import Relay

pytestmark = pytest.mark.integration
G, V, P = "samplecontroller.k8s.io", "v1alpha1", "foos"


@pytest.fixture
def relay(kubeconfig: str, tmp_path: Path) -> Iterator[tuple[Relay, Path]]:
    """A relay in front of the API server, and a kubeconfig that goes through it."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    server = urlparse(config["clusters"][0]["cluster"]["server"])
    through = Relay(server.hostname or "127.0.0.1", server.port or 443)
    config["clusters"][0]["cluster"]["server"] = f"{server.scheme}://{server.hostname}:{through.port}"
    path = tmp_path / "relayed.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    yield through, path
    through.close()


def foo_watches(tmp_path: Path) -> Path:
    path = tmp_path / "watches.yaml"
    path.write_text(f"- version: {V}\n  group: {G}\n  kind: Foo\n  role: {ROOT / 'roles' / 'foo'}\n")
    return path


def foo(name: str, replicas: int) -> dict[str, object]:
    spec = {"deploymentName": f"{name}-web", "replicas": replicas}
    return {"apiVersion": f"{G}/{V}", "kind": "Foo", "metadata": {"name": name}, "spec": spec}


def test_a_change_made_right_after_every_connection_went_silent_is_reconciled_within_60s(
    operator, objects: Objects, relay: tuple[Relay, Path], tmp_path: Path
) -> None:
    through, kubeconfig = relay
    op = operator(foo_watches(tmp_path), env={"KUBECONFIG": str(kubeconfig)})
    objects.create(G, V, P, foo("quiet", 1))
    wait_until(lambda: (condition(objects.get(G, V, P, "quiet"), "Successful") or {}).get("status") == "True", 90, "ok")

    silenced = through.silence()
    assert silenced > 0
    started = time.monotonic()
    objects.patch(G, V, P, "quiet", {"spec": {"replicas": 3}})
    wait_until(
        lambda: objects.apps.read_namespaced_deployment("quiet-web", objects.namespace).spec.replicas == 3,
        75,
        "the change reconciled through fresh connections",
        interval=1,
    )
    took = time.monotonic() - started
    print(f"\nsilent connections: {silenced}; change reconciled {took:.1f}s after they went silent")
    assert took < 60
    assert op.proc.poll() is None
