"""Kube.connect with a kubeconfig it cannot use: one ConfigError naming the file, never the client's traceback;
and Kube.get_or_none against a fake API server: NotFound is None, every other error is raised."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client as k8s_client
from kubernetes.config import kube_config

from hybrid_operator.errors import ConfigError
from hybrid_operator.kube.client import ApiError, Kube, Resource
from hybrid_operator.kube.objects import GVK

ROOT = Path(__file__).resolve().parents[3]

KUBECONFIGS: dict[str, str | bytes] = {
    "not-yaml": "clusters: [unclosed\n",
    "not-utf8": b"\xff\xfe\x00",
    "a-list": "- a\n- b\n",
    "empty-mapping": "{}\n",
    "deep": "[" * 5000,
    "no-such-context": "apiVersion: v1\ncurrent-context: nowhere\ncontexts: []\nclusters: []\nusers: []\n",
    "contexts-not-a-list": "current-context: c\ncontexts: 5\n",
}


@pytest.mark.parametrize("name", sorted(KUBECONFIGS))
def test_an_unusable_kubeconfig_is_one_config_error(tmp_path: Path, name: str) -> None:
    path = tmp_path / "kubeconfig"
    content = KUBECONFIGS[name]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigError, match=f"^cannot use kubeconfig {path}: ") as caught:
        Kube.connect(str(path))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("where", ["missing", "directory"])
def test_a_kubeconfig_that_is_not_a_file(tmp_path: Path, where: str) -> None:
    path = tmp_path / "nothing" if where == "missing" else tmp_path
    with pytest.raises(ConfigError, match=f"^cannot use kubeconfig {path}: "):
        Kube.connect(str(path))


def test_no_kubeconfig_outside_a_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "config"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(ConfigError, match=r"no usable kubeconfig .* and not in a cluster .*: set --kubeconfig"):
        Kube.connect(None)


def test_run_with_a_bad_kubeconfig_exits_2_with_one_line(tmp_path: Path) -> None:
    """The whole command, as a person runs it: exit code 2 and one error line, no traceback."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [unclosed\n", encoding="utf-8")
    argv = ["run", "--kubeconfig", str(kubeconfig), "--metrics-bind-address", "0", "--health-probe-bind-address", "0"]
    argv += ["--user-metrics-bind-address", "0"]  # another operator on this machine may hold localhost:5050
    proc = subprocess.run(
        [sys.executable, "-m", "hybrid_operator", *argv, "--watches-file", str(ROOT / "watches.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert f"cannot use kubeconfig {kubeconfig}: " in line
    assert line == proc.stderr.splitlines()[-1]


FOOS = Resource(GVK("cache.example.com", "v1alpha1", "Foo"), "foos", namespaced=True)
NODES = Resource(GVK("", "v1", "Node"), "nodes", namespaced=False)


class ScriptedServer:
    """Answers every GET with the status and body set for its path (404 for a path it does not know)."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, dict[str, object]]] = {}
        self.paths: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.paths.append(self.path)
                status, body = server.answers.get(self.path, (404, {"kind": "Status", "code": 404}))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def kube(self) -> Kube:
        config = k8s_client.Configuration()
        config.host = f"http://127.0.0.1:{self.http.server_address[1]}"
        return Kube(k8s_client.ApiClient(config))


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.http.shutdown()
    scripted.http.server_close()


def test_get_or_none_returns_the_object(server: ScriptedServer) -> None:
    meta = {"name": "a", "namespace": "ns", "uid": "u-1"}
    foo: dict[str, object] = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Foo", "metadata": meta}
    server.answers["/apis/cache.example.com/v1alpha1/namespaces/ns/foos/a"] = (200, foo)
    assert server.kube().get_or_none(FOOS, "ns", "a") == foo


def test_get_or_none_is_none_for_not_found(server: ScriptedServer) -> None:
    assert server.kube().get_or_none(FOOS, "ns", "gone") is None
    assert server.kube().get_or_none(NODES, None, "gone") is None
    assert server.paths == ["/apis/cache.example.com/v1alpha1/namespaces/ns/foos/gone", "/api/v1/nodes/gone"]


@pytest.mark.parametrize("status", [400, 401, 403, 409, 410, 429, 500, 503])
def test_get_or_none_raises_every_other_error(server: ScriptedServer, status: int) -> None:
    server.answers["/api/v1/nodes/n"] = (status, {"kind": "Status", "message": "no", "code": status})
    with pytest.raises(ApiError) as caught:
        server.kube().get_or_none(NODES, None, "n")
    assert caught.value.status == status


def test_get_or_none_raises_when_the_server_is_unreachable(server: ScriptedServer) -> None:
    kube = server.kube()
    server.http.shutdown()
    server.http.server_close()
    with pytest.raises(ApiError) as caught:
        kube.get_or_none(NODES, None, "n")
    assert caught.value.status == 0
