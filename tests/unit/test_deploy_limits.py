"""deploy/'s manager Deployment: its limits agree with the bounds its flags set.

The pod's memory must hold the operator, its warm Ansible and every run the workers and spare lanes may
have at once, each grown to its bound (and the /tmp volume when it is in memory); the /tmp volume must hold
the artifacts budget (counted in disk blocks, as the kubelet counts a volume) with room for what live runs
write. ``assert_limits_hold`` is also run on the overlays' renderings (``tests/integration/test_rbac.py``).
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


def flags(pod: dict[str, Any]) -> Any:
    return build_parser().parse_args(["run", *pod["containers"][0]["args"]])


def tmp_volume(pod: dict[str, Any]) -> dict[str, Any]:
    return dict(next(v for v in pod["volumes"] if v["name"] == "tmp")["emptyDir"])


def memory_needed(pod: dict[str, Any]) -> int:
    """What the pod's memory must hold: the operator, its warm Ansible, every run at its bound and, for a
    /tmp volume in memory (``medium: Memory``), the volume: its pages are the pod's memory."""
    args = flags(pod)
    runs = 2 * args.max_concurrent_reconciles  # workers and spare lanes
    assert args.ansible_run_memory > 0, "runs must be bounded where the pod is"
    volume = tmp_volume(pod)
    in_memory = _size(volume["sizeLimit"]) if volume.get("medium") == "Memory" else 0
    return OPERATOR_AND_ZYGOTE + runs * args.ansible_run_memory + in_memory


def assert_limits_hold(pod: dict[str, Any]) -> None:
    """The pod's memory limit holds ``memory_needed``; its /tmp volume the artifacts budget with room."""
    assert memory_needed(pod) <= _size(pod["containers"][0]["resources"]["limits"]["memory"])
    assert flags(pod).max_artifacts_size + TMP_HEADROOM <= _size(tmp_volume(pod)["sizeLimit"])


def test_the_pods_memory_holds_every_run_at_its_bound() -> None:
    pod = manager()
    assert memory_needed(pod) <= _size(pod["containers"][0]["resources"]["limits"]["memory"])


def test_the_tmp_volume_holds_the_artifacts_budget_with_room() -> None:
    pod = manager()
    assert flags(pod).max_artifacts_size + TMP_HEADROOM <= _size(tmp_volume(pod)["sizeLimit"])


def test_a_tmp_volume_in_memory_counts_against_the_pods_memory() -> None:
    pod = manager()
    on_disk = memory_needed(pod)
    pod["volumes"] = [{"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "384Mi"}}]
    assert memory_needed(pod) == on_disk + (384 << 20)
