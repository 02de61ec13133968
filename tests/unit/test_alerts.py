"""The alerts, recording rules and dashboard agree with each other and with the code: the PrometheusRule is
the plain rule file wrapped, every metric they read is one the operator exports, every alert has a runbook
on the docs site's runbook page and a ``promtool test rules`` case (hack/test.sh runs promtool on them).

``python -m tests.unit.test_alerts`` writes deploy/prometheus/prometheus_rule.yaml again from rules.yaml.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from hybrid_operator import metrics  # noqa: F401  (registers the operator's metrics)
from hybrid_operator.metrics import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus/rules.yaml"
WRAPPER = ROOT / "deploy/prometheus/prometheus_rule.yaml"
PROMTOOL_TESTS = ROOT / "tests/prometheus/rules_test.yaml"
DASHBOARD = ROOT / "deploy/grafana/hybrid-operator.json"
RUNBOOKS_PAGE = ROOT / "docs/operating/runbooks.md"
RUNBOOKS_URL = "https://hybrid-operator.dev/operating/runbooks/"  # mkdocs.yml's site_url + the page

HEADER = """\
---
# GENERATED from rules.yaml by `python -m tests.unit.test_alerts`: edit rules.yaml, then run that.
# The operator's alerts and recording rules for the Prometheus Operator; the runbooks are at
# https://hybrid-operator.dev/operating/runbooks/. Prometheus must select this rule (ruleSelector) and namespace
# (ruleNamespaceSelector).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: hybrid-operator
  namespace: hybrid-operator-system
  labels:
    app.kubernetes.io/name: hybrid-operator
    app.kubernetes.io/component: metrics
spec:
"""


def render_wrapper() -> str:
    """The PrometheusRule: rules.yaml from its ``groups:`` on, comments and all, indented under spec."""
    text = RULES.read_text()
    body = text[text.index("\ngroups:") + 1 :]
    return HEADER + "".join(f"  {line}" if line.strip() else line for line in body.splitlines(keepends=True))


def groups() -> list[dict[str, Any]]:
    return list(yaml.safe_load(RULES.read_text())["groups"])


def alerts() -> list[dict[str, Any]]:
    return [rule for group in groups() for rule in group["rules"] if "alert" in rule]


def dashboard_exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


def exported_names() -> set[str]:
    """Every series name /metrics can carry (counters' _total, histograms' _bucket, _sum, _count)."""
    names = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        for suffix in ("_total", "_created", "_bucket", "_sum", "_count", "_info"):
            names.add(family.name + suffix)
    return names


def test_the_prometheus_rule_is_the_rule_file_wrapped() -> None:
    assert WRAPPER.read_text() == render_wrapper(), "run `python -m tests.unit.test_alerts` to write it again"
    wrapped = yaml.safe_load(WRAPPER.read_text())
    assert wrapped["spec"]["groups"] == groups()
    kustomization = yaml.safe_load((ROOT / "deploy/prometheus/kustomization.yaml").read_text())
    assert WRAPPER.name in kustomization["resources"]


def test_every_metric_the_rules_and_the_dashboard_read_is_exported() -> None:
    recorded = {rule["record"] for group in groups() for rule in group["rules"] if "record" in rule}
    exprs = [rule["expr"] for group in groups() for rule in group["rules"]] + dashboard_exprs()
    read = {name for expr in exprs for name in re.findall(r"\b(?:ansible_operator|hybrid_operator)_\w+", expr)}
    read -= {name for name in read if any(name in r for r in recorded)}  # parts of recorded names
    assert read, "no operator metric found in the rules: the pattern is wrong"
    assert sorted(read - exported_names()) == []


def test_every_alert_has_a_runbook_on_the_site() -> None:
    """Each alert links to its section of the runbook page (tests/unit/docs/test_site.py finds each anchor in
    the built site)."""
    headings = set(re.findall(r"^## (HybridOperator\w+)$", RUNBOOKS_PAGE.read_text(), flags=re.M))
    for alert in alerts():
        assert alert["annotations"]["runbook"] == f"{RUNBOOKS_URL}#{alert['alert'].lower()}"
        assert alert["alert"] in headings, f"docs/operating/runbooks.md has no section {alert['alert']}"


def test_every_alert_has_a_promtool_case() -> None:
    cases = yaml.safe_load(PROMTOOL_TESTS.read_text())
    tested = {case["alertname"] for test in cases["tests"] for case in test.get("alert_rule_test", [])}
    assert sorted({a["alert"] for a in alerts()} - tested) == []


if __name__ == "__main__":
    WRAPPER.write_text(render_wrapper())
    print(f"wrote {WRAPPER.relative_to(ROOT)}", file=sys.stderr)
