"""The runs' ``sitecustomize``: a Kubernetes name from a custom resource never becomes another path.

The wiring is tested as runs use it, in a new interpreter with only ``PYTHONPATH`` set (the kubernetes
client imported afterwards, as a module does); the rule itself with hypothesis: whatever a name is, either
it is refused, or the URL the client builds from it has the segments it should and urllib3 sends it as built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from urllib3.util import parse_url

from hybrid_operator.ansible import running
from hybrid_operator.ansible.runsite import sitecustomize

SITE = running.RUNSITE / "sitecustomize.py"


RUNSITE = sitecustomize  # imported by name it installs nothing: this process stays as it is

PROBE = r"""
import json, sys
from kubernetes import client
from kubernetes.dynamic.resource import Resource
configmaps = Resource(prefix="api", group="", api_version="v1", kind="ConfigMap", namespaced=True, name="configmaps")
api = client.CoreV1Api(client.ApiClient(client.Configuration(host="http://127.0.0.1:9")))
out = {"installed": bool(getattr(sys, "_hybrid_operator_names_checked", False))}
for name in json.loads(sys.argv[1]):
    try:
        out[name] = ["path", configmaps.path(name=name, namespace="a")]
    except ValueError as exc:
        out[name] = ["refused", str(exc)]
for name in json.loads(sys.argv[1]):
    try:
        api.read_namespaced_config_map(name, "a", _request_timeout=0.2)
        out["api " + name] = ["sent"]
    except ValueError as exc:
        out["api " + name] = ["refused", str(exc)]
    except Exception as exc:
        out["api " + name] = ["sent", type(exc).__name__]
print(json.dumps(out))
"""
HOSTILE = [
    "../../b/secrets/db-creds",
    "../../../../../apis/example.com/v1/namespaces/a/foos?watch=true",
    "x?watch=true",
    "x#frag",
    "..",
    ".",
    "a/status",
    "%2e%2e",
    "a b",
    "a\nb",
    "a\x00b",
]


def probe(names: list[str], pythonpath: str) -> dict[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(names)], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_every_interpreter_of_a_run_refuses_hostile_names_before_any_request() -> None:
    seen = probe([*HOSTILE, "db-creds", "name.with.dots"], running.run_pythonpath())
    assert seen.pop("installed") is True
    for name in HOSTILE:
        assert seen[name][0] == "refused", name
        assert "refused by hybrid-operator" in seen[name][1] and "may not make a request" in seen[name][1]
        assert seen["api " + name][0] == "refused", name  # the generated API too: nothing was sent
    assert seen["db-creds"] == ["path", "/api/v1/namespaces/a/configmaps/db-creds"]
    assert seen["name.with.dots"] == ["path", "/api/v1/namespaces/a/configmaps/name.with.dots"]
    assert seen["api db-creds"][0] == "sent"  # refused by nobody: the connection fails, as there is no server


def test_without_the_run_site_the_client_sends_what_it_is_given() -> None:
    """What the check prevents, shown: the plain client builds a path that leaves the namespace."""
    seen = probe(["../../b/secrets/db-creds"], "")
    assert seen["installed"] is False
    path = seen["../../b/secrets/db-creds"][1]
    assert parse_url("http://h" + path).path == "/api/v1/namespaces/b/secrets/db-creds"


def test_another_sitecustomize_still_runs(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['MARKER_SITE'] = 'ran'\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(running.RUNSITE), str(tmp_path)])}
    code = "import os, sys; print(os.environ.get('MARKER_SITE'), getattr(sys, '_hybrid_operator_names_checked'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["ran", "True"], out.stderr


def test_the_run_site_holds_nothing_else_a_run_could_import() -> None:
    assert sorted(p.name for p in running.RUNSITE.iterdir() if p.suffix == ".py") == ["__init__.py", "sitecustomize.py"]


@settings(max_examples=2000, deadline=None)
@given(st.text(max_size=12), st.text(alphabet="ab./%?#2eEfF", max_size=8))
def test_a_name_is_refused_or_stays_one_segment_of_the_url(name: str, namespace: str) -> None:
    try:
        RUNSITE.check_segment("name", name)
        RUNSITE.check_segment("namespace", namespace)
    except ValueError:
        return
    path = f"/api/v1/namespaces/{namespace or 'a'}/configmaps/{name or 'x'}"
    sent = parse_url("http://h" + path)
    assert sent.query is None and sent.fragment is None
    assert sent.path is not None and sent.path.split("/")[-1] in (name or "x", _escaped(name or "x"))
    assert len(sent.path.split("/")) == 7


def _escaped(name: str) -> str:
    """What urllib3 makes of characters a URL may not hold as they are (it escapes, never resolves)."""
    return str(parse_url("http://h/" + name).path).lstrip("/")


@pytest.mark.parametrize("path", ["/api/v1/namespaces/a/pods/p/proxy/../../x", "/api/v1/%2e%2e/x", "/api/v1/x?watch=1"])
def test_a_built_path_with_a_dot_segment_query_or_escape_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="does not name one resource"):
        RUNSITE.check_path(path)
