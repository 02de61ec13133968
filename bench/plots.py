"""Pictures of a bench run (``python -m bench ... --plot``): PNGs written next to the run's JSON.

- ``<json stem>-latency.png``: the latency of every sample, per contender, for each P1 role and each phase of
  the heavy and kiali scenarios (a box for the middle half and the median, every sample as a dot; a log
  scale, since contenders differ by 10x and more).
- ``<json stem>-p2-<N>.png``: for each P2 size, how many Foos had converged how many seconds after they were
  created, per contender (the slope is the throughput; where a line ends, that contender was done).
- ``<json stem>-restart-<N>.png``: for each restart size, the start-up work done (runs, and for ours the
  objects its start-up check decided) over the seconds since the process started, per contender, with a mark
  where the new Foo created right after /readyz became ``Successful``.

Drawn from the JSON alone (``python -m bench.plots RESULT.json`` draws an older run), with matplotlib's
file-only backend, which the test extras install.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

Result = dict[str, Any]


def latency_panels(run: Result) -> list[tuple[str, dict[str, list[float]]]]:
    """(title, contender -> samples in seconds) for each latency the run measured."""
    scen: Result = run.get("scenarios") or {}
    panels = []
    for role, by in (scen.get("p1") or {}).items():
        panels.append((f"P1 {role}: create -> Successful", _samples(by, ("samples",))))
    for name in ("heavy", "kiali"):
        by = scen.get(name) or {}
        if "skipped" in by:
            continue
        for phase, label in (("create", "first reconcile"), ("change", "spec change"), ("delete", "delete")):
            panels.append((f"{name}: {label}", _samples(by, (phase, "samples"))))
    return [(title, samples) for title, samples in panels if any(samples.values())]


def _samples(by: Result, path: tuple[str, ...]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for contender, result in by.items():
        value: Any = result
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, list):
            out[contender] = [float(v) for v in value if isinstance(v, int | float)]
    return out


def write(run: Result, json_path: Path) -> list[Path]:
    """Draw the run's pictures next to ``json_path``; the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    panels = latency_panels(run)
    stamp = f"{run.get('id', '?')}, load {(run.get('machine') or {}).get('load_average_at_start', [0])[0]:.1f}"
    if panels:
        fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels) + 0.6), squeeze=False)
        for ax, (title, samples) in zip(axes[:, 0], panels, strict=True):
            names = [c for c in samples if samples[c]]
            ax.boxplot([samples[c] for c in names], widths=0.5, showfliers=False)
            for column, name in enumerate(names, start=1):
                ax.plot([column] * len(samples[name]), samples[name], "o", alpha=0.4, markersize=3)
            ax.set_xticks(range(1, len(names) + 1), names)
            ax.set_yscale("log")
            ax.set_title(title, fontsize=10)
            ax.set_ylabel("seconds (log)", fontsize=8)
        fig.suptitle(f"Latency per contender (bench run {stamp})", fontsize=11)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / (2.6 * len(panels) + 0.6)))  # the title above panel 1
        written.append(_save(fig, json_path, "latency"))
        plt.close(fig)
    for count, by in ((run.get("scenarios") or {}).get("p2") or {}).items():
        fig, ax = plt.subplots(figsize=(8, 4.5))
        drawn = False
        for contender, result in by.items():
            times = sorted(float(t) for t in (result or {}).get("converged_at") or [])
            if times:
                ax.step([0.0, *times], range(len(times) + 1), where="post", label=contender)
                drawn = True
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xlabel("seconds since the Foos were created")
        ax.set_ylabel("Foos converged")
        ax.set_title(f"P2: {count} Foos at once, converged over time (bench run {stamp})", fontsize=10)
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        written.append(_save(fig, json_path, f"p2-{count}"))
        plt.close(fig)
    for count, by in ((run.get("scenarios") or {}).get("restart") or {}).items():
        path = _restart_plot(plt, count, by, json_path, stamp)
        if path is not None:
            written.append(path)
    return written


def _restart_plot(plt: Any, count: str, by: Result, json_path: Path, stamp: str) -> Path | None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    drawn = False
    for contender, result in by.items():
        points = [(float(t), float(w)) for t, w in (result or {}).get("progress") or []]
        if not points:
            continue
        line = ax.step([0.0] + [t for t, _ in points], [0.0] + [w for _, w in points], where="post", label=contender)
        newcomer, ready = (result or {}).get("newcomer_seconds"), (result or {}).get("ready_seconds")
        if newcomer is not None and ready is not None:
            ax.axvline(ready + newcomer, color=line[0].get_color(), linestyle=":", alpha=0.8)
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlabel("seconds since the operator started (dotted: the new Foo Successful)")
    ax.set_ylabel("start-up work done (runs + checks)")
    ax.set_title(f"restart: {count} converged Foos exist, the operator starts (bench run {stamp})", fontsize=10)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = _save(fig, json_path, f"restart-{count}")
    plt.close(fig)
    return path


def _save(fig: Any, json_path: Path, what: str) -> Path:
    path = json_path.with_name(f"{json_path.stem}-{what}.png")
    fig.savefig(path, dpi=110)
    return path


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print("usage: python -m bench.plots RESULT.json...", file=sys.stderr)
        return 2
    for path in paths:
        for written in write(json.loads(path.read_text(encoding="utf-8")), path):
            print(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
