"""The bench's record of the machine and the test bed: the controller manager's request rate read from the
process the bed started (P2's floor depends on it), nothing for a cluster that is not the local bed; the cost
of creating a file at the start (it moves with what the disk freed just before)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import report


def _bed(tmp_path: Path, argv: list[str]) -> Iterator[str]:
    """A bed's state dir whose controller manager is a sleeping process with ``argv``."""
    process = subprocess.Popen(argv, executable=sys.executable)
    try:
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "kube-controller-manager.pid").write_text(f"{process.pid}\n")
        yield str(tmp_path / "admin.kubeconfig")
    finally:
        process.kill()
        process.wait()


SLEEP = ["-c", "import time; time.sleep(30)"]


@pytest.mark.parametrize(
    ("flags", "qps"),
    [(["--kube-api-qps", "100"], 100), (["--kube-api-qps=50"], 50), (["--leader-elect=false"], 20)],
)
def test_the_beds_controller_rate_is_read_from_its_process(tmp_path: Path, flags: list[str], qps: int) -> None:
    for kubeconfig in _bed(tmp_path, ["/opt/k8s/kube-controller-manager", *SLEEP, *flags]):
        assert report.controller_qps(kubeconfig) == qps


def test_another_process_or_cluster_gives_nothing(tmp_path: Path) -> None:
    for kubeconfig in _bed(tmp_path, ["/usr/bin/not-a-controller", *SLEEP, "--kube-api-qps", "100"]):
        assert report.controller_qps(kubeconfig) is None  # a reused pid: not the bed's controller manager
    assert report.controller_qps(str(tmp_path / "elsewhere" / "kubeconfig")) is None
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "run" / "kube-controller-manager.pid").write_text("not a pid")
    assert report.controller_qps(str(tmp_path / "admin.kubeconfig")) is None


def test_the_file_create_probe_times_creates_and_leaves_nothing(tmp_path: Path) -> None:
    us = report.file_create_us(tmp_path, count=50)
    assert 0 < us < 1_000_000
    assert list(tmp_path.iterdir()) == []  # its files and dir removed again


def test_the_header_says_what_the_machine_record_holds() -> None:
    machine = {"bed_controller_qps": 100, "file_create_us_at_start": 61.4}
    assert report._qps(machine) == " (the bed's controller manager at 100 requests/s)"
    assert report._file_create(machine) == ", a file created in 61 us"
    assert report._qps({}) == report._file_create({"file_create_us_at_start": None}) == ""  # older results
