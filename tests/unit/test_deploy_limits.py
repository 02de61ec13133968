"""deploy/'s manager Deployment: its limits agree with the bounds its flags set.

The pod's memory must hold the operator, its warm Ansible and every run the workers and spare lanes may
have at once, each grown to its bound; the /tmp volume must hold the artifacts budget (counted in disk
blocks, as the kubelet counts a volume) with room for what live runs write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hybrid_operator.cli import build_parser
from hybrid_operator.settings.flags import size as _size

ROOT = Path(__file__).resolve().parents[2]
OPERATOR_AND_ZYGOTE = 256 << 20  # measured at rest: docs/internals/benchmarks.md
TMP_HEADROOM = 256 << 20  # what live runs write beside the kept artifacts (their input dirs, temp files)


def manager() -> dict[str, Any]:
    docs = yaml.safe_load_all((ROOT / "deploy" / "manager" / "manager.yaml").read_text(encoding="utf-8"))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    return dict(deployment["spec"]["template"]["spec"])


def flags() -> Any:
    container = manager()["containers"][0]
    return build_parser().parse_args(["run", *container["args"]])


def test_the_pods_memory_holds_every_run_at_its_bound() -> None:
    args = flags()
    limit = _size(manager()["containers"][0]["resources"]["limits"]["memory"])
    runs = 2 * args.max_concurrent_reconciles  # workers and spare lanes
    assert args.ansible_run_memory > 0, "runs must be bounded where the pod is"
    assert OPERATOR_AND_ZYGOTE + runs * args.ansible_run_memory <= limit


def test_the_tmp_volume_holds_the_artifacts_budget_with_room() -> None:
    args = flags()
    tmp = next(v for v in manager()["volumes"] if v["name"] == "tmp")
    assert args.max_artifacts_size + TMP_HEADROOM <= _size(tmp["emptyDir"]["sizeLimit"])
