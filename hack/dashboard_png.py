"""Draw the main panels of deploy/grafana/hybrid-operator.json as one PNG, from a live Prometheus.

The observability page's picture of the dashboard (docs/dashboard.png): the panels' own queries, asked of Prometheus'
HTTP API over the last minutes, drawn with matplotlib. tests/integration/test_prometheus.py calls ``render``
on the Prometheus it started (and writes docs/dashboard.png when HYBRID_OPERATOR_WRITE_DASHBOARD_PNG=1);
by hand:

    python hack/dashboard_png.py http://127.0.0.1:9090 docs/dashboard.png [minutes]
"""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "hybrid-operator.json"
MAIN_PANELS = (
    "Reconciles per second by kind and result",
    "Failure ratio by kind",
    "Reconcile duration (dequeue to status written)",
    "Failures by reason",
    "Queue wait (due to a worker)",
    "Runs in flight vs cap",
)


def query_range(base: str, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{base}/api/v1/query_range?{params}", timeout=30) as resp:
        body = json.load(resp)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body.get('error')}")
    return list(body["data"]["result"])


def legend(fmt: str, labels: dict[str, str]) -> str:
    for name, value in labels.items():
        fmt = fmt.replace("{{" + name + "}}", value)
    return fmt.replace("Foo.v1alpha1.samplecontroller.k8s.io", "Foo")


def render(base: str, out: Path, minutes: float = 10, job: str = ".+") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = {p["title"]: p for p in json.loads(DASHBOARD.read_text())["panels"]}
    end = time.time()
    start = end - minutes * 60
    step = max(1.0, (end - start) / 200)
    fig, axes = plt.subplots(3, 2, figsize=(13, 10), constrained_layout=True)
    for ax, title in zip(axes.flat, MAIN_PANELS, strict=True):
        panel = panels[title]
        for target in panel["targets"]:
            expr = target["expr"].replace("$job", job)
            for series in query_range(base, expr, start, end, step):
                xs = [(float(t) - end) / 60 for t, _ in series["values"]]
                ys = [float(v) for _, v in series["values"]]
                ax.plot(xs, ys, label=legend(target.get("legendFormat", ""), series["metric"]))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("minutes ago", fontsize=8)
        unit = panel["fieldConfig"]["defaults"].get("unit", "")
        ax.set_ylabel({"ops": "per second", "s": "seconds", "percentunit": "share"}.get(unit, ""), fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("hybrid-operator: a Foo converging and one failing, scraped by Prometheus every second", fontsize=11)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    print(render(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) == 4 else 10))
