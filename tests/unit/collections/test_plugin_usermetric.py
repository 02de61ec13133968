"""osdk_metric: the Galaxy module's arguments, the JSON it sends and where, under our collection's name.

One test runs a real ``ansible-playbook`` (no cluster) against a recording server, so what is compared
with Galaxy's module is what Ansible actually sent after its own argument coercion.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hybrid_operator.serving import receiving
from hybrid_operator.serving.usermetrics import UserMetrics

ROOT = Path(__file__).resolve().parents[3]
COLLECTIONS = ROOT / "hybrid_operator" / "collections"
PLUGIN_UTILS = COLLECTIONS / "ansible_collections/hybrid_operator/util/plugins/plugin_utils/usermetric.py"


def _load() -> ModuleType:
    """Load the file on its own: it needs only the standard library, not Ansible's collection loader."""
    spec = importlib.util.spec_from_file_location("_hybrid_operator_util_usermetric", PLUGIN_UTILS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


usermetric = _load()


def test_the_plugin_and_the_receiver_agree_on_the_environment_variable() -> None:
    assert usermetric.URL_ENV == receiving.URL_ENV
    upstream = f"http://{receiving.DEFAULT_ADDRESS}{receiving.PATH}"
    assert upstream == usermetric.DEFAULT_ADDRESS


@pytest.mark.parametrize(
    ("given", "environ", "expected"),
    [
        ("http://10.0.0.1:9/metrics", {receiving.URL_ENV: "http://127.0.0.1:1/metrics"}, "http://10.0.0.1:9/metrics"),
        (None, {receiving.URL_ENV: "http://127.0.0.1:1/metrics"}, "http://127.0.0.1:1/metrics"),
        (None, {}, "http://localhost:5050/metrics"),  # a role run by hand: where operator-sdk listens
    ],
)
def test_where_the_metric_goes(given: str | None, environ: dict[str, str], expected: str) -> None:
    assert usermetric.address(given, environ) == (expected, None)


def test_a_receiver_that_is_off_is_said_so() -> None:
    url, problem = usermetric.address(None, {receiving.URL_ENV: ""})
    assert url is None and "receiver is off" in problem


def test_only_http_addresses() -> None:
    url, problem = usermetric.address("file:///etc/passwd", {})
    assert url is None and "http://" in problem


def test_payload_carries_only_the_given_type_as_galaxy_builds_it() -> None:
    args = {"name": "m", "description": "d", "address": None, "counter": {"increment": None, "add": None}}
    assert usermetric.payload({**args, "gauge": None}) == {
        "name": "m",
        "description": "d",
        "counter": {"increment": None, "add": None},
    }


def test_send_reports_the_receivers_answer() -> None:
    store = UserMetrics(reserved=set)
    srv = receiving.server("127.0.0.1:0", store)
    assert srv is not None
    srv.start()
    try:
        url = receiving.url(srv)
        env = {usermetric.URL_ENV: url, usermetric.TOKEN_ENV: srv.token}  # as the operator tells its runs
        assert usermetric.send(url, {"name": "m", "description": "d", "gauge": {"set": 2}}, environ=env) == (200, "")
        status, text = usermetric.send(url, {"name": "m", "description": "d", "counter": {}}, environ=env)
        assert (status, text) == (400, "cannot change metric type of m, which is a gauge")
        status, _ = usermetric.send(url, {"name": "m", "description": "d", "gauge": {"set": 3}}, environ={})
        assert status == 401  # not one of the operator's runs
    finally:
        srv.shutdown()
        srv.server_close()
    status, text = usermetric.send(url, {"name": "m"}, timeout=2)
    assert status == 0 and text.startswith(f"cannot reach the metrics receiver at {url}")


def test_the_secret_goes_to_the_operators_receiver_only(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[dict[str, str]] = []

    def capture(request: Any, timeout: float) -> Any:
        sent.append(dict(request.header_items()))
        raise OSError("not sent")

    monkeypatch.setattr(usermetric.urllib.request, "urlopen", capture)
    env = {usermetric.URL_ENV: "http://127.0.0.1:5050/metrics", usermetric.TOKEN_ENV: "s3cret"}
    usermetric.send("http://127.0.0.1:5050/metrics", {"name": "m"}, environ=env)
    usermetric.send("http://elsewhere.example:5050/metrics", {"name": "m"}, environ=env)  # a task's address
    assert [h.get("Authorization") for h in sent] == ["Bearer s3cret", None]


# -- a real playbook -----------------------------------------------------------------------------------


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[Any]]]:
    """A receiver that records each body and refuses names starting with 'refuse'."""
    bodies: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(doc)
            refused = str(doc.get("name", "")).startswith("refuse")
            self.send_response(400 if refused else 200)
            self.end_headers()
            self.wfile.write(b"no thanks\n" if refused else b"")

        def log_message(self, format: str, *args: object) -> None:
            return

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/metrics", bodies
    srv.shutdown()
    srv.server_close()


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - operator_sdk.util.osdk_metric: {name: c, description: create, counter: {}}
    - operator_sdk.util.osdk_metric: {name: c, description: inc, counter: {increment: "yes"}}
    - operator_sdk.util.osdk_metric: {name: g, description: sub, gauge: {subtract: "7"}}
    - operator_sdk.util.osdk_metric: {name: h, description: obs, histogram: {observe: 2}}
    - operator_sdk.util.osdk_metric: {name: s, description: obs, summary: {}}
    - name: Refused
      operator_sdk.util.osdk_metric: {name: refuse_me, description: x, gauge: {set: 1}}
      register: refused
      ignore_errors: true
    - name: Unknown option
      operator_sdk.util.osdk_metric: {name: x, description: x, gauge: {bogus: 1}}
      register: unknown
      ignore_errors: true
    - name: Missing description
      operator_sdk.util.osdk_metric: {name: x, counter: {}}
      register: missing
      ignore_errors: true
    - ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ {'refused': refused, 'unknown': unknown, 'missing': missing} | to_json }}"
        mode: "0600"
"""


def test_a_playbook_sends_what_galaxys_module_sends(recorder: tuple[str, list[Any]], tmp_path: Path) -> None:
    url, bodies = recorder
    (tmp_path / "play.yml").write_text(textwrap.dedent(PLAYBOOK))
    out = tmp_path / "out.json"
    env = {**os.environ, receiving.URL_ENV: url, "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "play.yml", "-e", f"out={out}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    counter = {"increment": None, "add": None}
    assert bodies == [
        {"name": "c", "description": "create", "counter": counter},
        {"name": "c", "description": "inc", "counter": {**counter, "increment": True}},
        {
            "name": "g",
            "description": "sub",
            "gauge": {
                "set": None,
                "increment": None,
                "decrement": None,
                "add": None,
                "subtract": 7.0,
                "set_to_current_time": None,
            },
        },
        {"name": "h", "description": "obs", "histogram": {"observe": 2.0}},
        {"name": "s", "description": "obs", "summary": {"observe": None}},
        {"name": "refuse_me", "description": "x", "gauge": {**dict.fromkeys(bodies[2]["gauge"]), "set": 1.0}},
    ]
    results = json.loads(out.read_text())
    assert results["refused"]["failed"] and results["refused"]["msg"] == "no thanks"
    assert results["refused"]["status_code"] == 400
    assert results["unknown"]["failed"] and "gauge.bogus" in results["unknown"]["msg"]
    assert results["missing"]["failed"] and "description" in results["missing"]["msg"]
