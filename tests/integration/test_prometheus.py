"""A real Prometheus scraping a real operator: the alerts fire, the recording rules record, the dashboard's
queries answer.

The test starts Prometheus (Debian's ``prometheus`` package; hack/test.sh installs it) on loopback with a
config of its own: it scrapes the operator, started with ``--metrics-secure --metrics-require-rbac``, every
second over HTTPS with the token of a ServiceAccount bound to deploy/'s metrics-reader ClusterRole, and
evaluates a copy of deploy/prometheus/rules.yaml whose ``for:`` durations are a few seconds. One Foo
converges, one cannot (its Deployment's name is taken: ErrResourceExists, retried with backoff), and an
Open kind's role sends role metrics. Outside CI the test skips, saying why, when Prometheus is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import ROOT, Objects, free_port, service_account_token, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
FOO_GVK = "Foo.v1alpha1.samplecontroller.k8s.io"
JOB = "hybrid-operator-metrics"  # the job the ServiceMonitor gives (the Service's name); the alerts use it
READER_ROLE = ROOT / "deploy/rbac/metrics_reader_role.yaml"
DASHBOARD = ROOT / "deploy/grafana/hybrid-operator.json"
FAST_FOR = "3s"
# Panels that may be empty here: shards need --sharding; nothing restarts its watch in two minutes.
MAY_BE_EMPTY = {"Shard balance (--sharding)"}


def dashboard_png() -> Any:
    """hack/dashboard_png.py, a script, loaded as a module (it imports matplotlib, a test dependency)."""
    spec = importlib.util.spec_from_file_location("dashboard_png", ROOT / "hack/dashboard_png.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus is not installed, and CI must run this test (hack/test.sh installs it)")
        pytest.skip("prometheus is not installed (Debian: apt-get install prometheus; hack/test.sh does it as root)")
    return found


class Prometheus:
    def __init__(self, base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.base, self.proc, self.log = base, proc, log

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant query's result; fails the test on an error (a bad expression, say)."""
        url = f"{self.base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{expr}: {exc.code} {exc.read().decode()}") from exc
        assert body["status"] == "success", f"{expr}: {body}"
        return list(body["data"]["result"])

    def target_health(self) -> str:
        with urllib.request.urlopen(f"{self.base}/api/v1/targets", timeout=10) as resp:
            targets = json.load(resp)["data"]["activeTargets"]
        return ", ".join(f"{t['health']} {t.get('lastError', '')}" for t in targets)


def fast_rules(path: Path) -> Path:
    """deploy/prometheus/rules.yaml with every alert's ``for:`` a few seconds."""
    rules = yaml.safe_load((ROOT / "deploy/prometheus/rules.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "alert" in rule and "for" in rule:
                rule["for"] = FAST_FOR
    path.write_text(yaml.safe_dump(rules))
    return path


@pytest.fixture
def scraper_token(api: client.ApiClient, namespace: str) -> Iterator[str]:
    """The token of a ServiceAccount bound, cluster-wide, to deploy/'s metrics-reader ClusterRole."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    role = yaml.safe_load(READER_ROLE.read_text())
    try:
        rbac.create_cluster_role(role)
    except ApiException as exc:
        if exc.status != 409:
            raise
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "prometheus"}})
    binding = f"{namespace}-prometheus"
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": binding},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
        }
    )
    yield service_account_token(api, namespace, "prometheus")
    rbac.delete_cluster_role_binding(binding)


def start_prometheus(tmp_path: Path, metrics_port: int, token: str) -> Prometheus:
    binary = prometheus_binary()
    (tmp_path / "token").write_text(token)
    (tmp_path / "token").chmod(0o600)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
        "rule_files": [str(fast_rules(tmp_path / "rules.yaml"))],
        "scrape_configs": [
            {
                "job_name": JOB,
                "scheme": "https",
                "authorization": {"credentials_file": str(tmp_path / "token")},
                # The operator's certificate is the self-signed one it made at start, as the ServiceMonitor's.
                "tls_config": {"insecure_skip_verify": True},
                "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    prometheus = Prometheus(f"http://127.0.0.1:{port}", proc, log)

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"prometheus exited:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{prometheus.base}/-/ready", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    wait_until(ready, 60, "prometheus ready")
    return prometheus


def stop(prometheus: Prometheus) -> None:
    if prometheus.proc.poll() is None:
        os.killpg(prometheus.proc.pid, signal.SIGTERM)
        try:
            prometheus.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(prometheus.proc.pid, signal.SIGKILL)
            prometheus.proc.wait(10)


def taken_deployment(objects: Objects, name: str) -> None:
    """A Deployment the failing Foo will name, not owned by it: sample-controller's ErrResourceExists."""
    objects.apps.create_namespaced_deployment(
        objects.namespace,
        {
            "metadata": {"name": name},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        },
    )


def alert_states(prometheus: Prometheus, name: str) -> set[str]:
    found = prometheus.query(f'ALERTS{{alertname="{name}", GVK="{FOO_GVK}"}}')
    return {series["metric"]["alertstate"] for series in found}


def test_a_real_prometheus_alerts_records_and_answers_the_dashboard(
    operator, objects: Objects, scraper_token: str, tmp_path: Path
) -> None:
    started = time.time()
    watches = tmp_path / "watches.yaml"
    watches.write_text(
        f"- {{version: v1alpha1, group: samplecontroller.k8s.io, kind: Foo, role: {ROOT / 'roles/foo'}}}\n"
        f"- {{version: v1, group: test.hybrid-operator.dev, kind: Open, role: metrics}}\n"
    )
    op = operator(
        watches,
        "--metrics-secure",
        "--metrics-require-rbac",
        "--ansible-roles-path",
        str(ROOT / "tests/fixtures/projects/metrics/roles"),
    )
    prometheus = start_prometheus(tmp_path, op.metrics_port, scraper_token)
    try:
        wait_until(lambda: prometheus.query(f'up{{job="{JOB}"}} == 1'), 30, "the operator scraped")
        taken_deployment(objects, "taken-web")
        g, v, p = "samplecontroller.k8s.io", "v1alpha1", "foos"
        body = {"apiVersion": f"{g}/{v}", "kind": "Foo"}
        objects.create(g, v, p, {**body, "metadata": {"name": "good"}, "spec": {"deploymentName": "good-web"}})
        objects.create(g, v, p, {**body, "metadata": {"name": "bad"}, "spec": {"deploymentName": "taken-web"}})
        open_kind = ("test.hybrid-operator.dev", "v1", "opens")
        objects.create(
            *open_kind, {"apiVersion": "test.hybrid-operator.dev/v1", "kind": "Open", "metadata": {"name": "m"}}
        )

        # The failure alert: pending first, then firing once its (shortened) `for:` has passed.
        seen: set[str] = set()

        def firing() -> bool:
            seen.update(alert_states(prometheus, "HybridOperatorReconcileFailing"))
            return "firing" in seen

        wait_until(firing, 120, "HybridOperatorReconcileFailing firing", interval=0.25)
        assert "pending" in seen, "the alert fired without going pending first"
        reasons = {
            s["metric"]["reason"] for s in prometheus.query("gvk_reason:hybrid_operator_reconcile_failures:rate5m")
        }
        assert "ErrResourceExists" in reasons
        # A few more scrapes so that the percentiles and the role metrics have data; the picture for the
        # docs gets a minute and a quarter so that its lines have a shape.
        enough = 75 if os.environ.get("HYBRID_OPERATOR_WRITE_DASHBOARD_PNG") else 20
        wait_until(lambda: time.time() - started > enough, 90, f"{enough} s of data", interval=1)

        rules = yaml.safe_load((ROOT / "deploy/prometheus/rules.yaml").read_text())
        records = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
        empty = sorted(r for r in records if not prometheus.query(r))
        assert empty == ["gvk:hybrid_operator_shard_objects:max_over_avg"], f"recording rules without series: {empty}"

        for panel in json.loads(DASHBOARD.read_text())["panels"]:
            results = [prometheus.query(t["expr"].replace("$job", ".+")) for t in panel["targets"]]
            if panel["title"] not in MAY_BE_EMPTY:
                assert any(results), f"the panel {panel['title']!r} has no data"
        role_metrics = prometheus.query('{job=~".+", __name__="counter_inc_test"}')
        assert role_metrics, "the role's osdk_metric counter was not scraped"

        minutes = (time.time() - started) / 60
        picture = dashboard_png().render(prometheus.base, tmp_path / "dashboard.png", minutes=minutes)
        assert picture.stat().st_size > 20_000
        if os.environ.get("HYBRID_OPERATOR_WRITE_DASHBOARD_PNG"):
            shutil.copy(picture, ROOT / "docs/dashboard.png")
    except BaseException:
        print(f"targets: {prometheus.target_health()}\nprometheus log:\n{prometheus.log.read_text()[-3000:]}")
        raise
    finally:
        stop(prometheus)
