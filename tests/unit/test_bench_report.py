"""The bench's record of the machine and the test bed: the controller manager's request rate read from the
command line of the process the bed started (P2's floor depends on it), nothing for a cluster that is not the
local bed; the cost of creating a file at the start (it moves with what the disk freed just before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import report


def _bed(tmp_path: Path, argv: list[str], pid: str = "4321") -> str:
    """A bed's state dir whose controller manager's pid file names a process (under ``tmp_path/proc``) whose
    command line is ``argv``; the kubeconfig path beside them."""
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "run" / "kube-controller-manager.pid").write_text(f"{pid}\n")
    (tmp_path / "proc" / "4321").mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc" / "4321" / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return str(tmp_path / "admin.kubeconfig")


@pytest.mark.parametrize(
    ("flags", "qps"),
    [
        (["--kube-api-qps", "100", "--kube-api-burst", "150"], 100),
        (["--kube-api-qps=50"], 50),
        (["--leader-elect=false"], 20),  # the controller manager's own default
        (["--kube-api-qps"], 20),  # no value after it: the default stands
        (["--kube-api-qps", "fast"], None),
    ],
)
def test_the_beds_controller_rate_is_read_from_its_command_line(
    tmp_path: Path, flags: list[str], qps: int | None
) -> None:
    kubeconfig = _bed(tmp_path, ["/opt/k8s/kube-controller-manager", *flags])
    assert report.controller_qps(kubeconfig, proc=tmp_path / "proc") == qps


def test_another_process_or_cluster_gives_nothing(tmp_path: Path) -> None:
    kubeconfig = _bed(tmp_path, ["/usr/bin/not-a-controller", "--kube-api-qps", "100"])
    assert report.controller_qps(kubeconfig, proc=tmp_path / "proc") is None  # a reused pid
    assert report.controller_qps(_bed(tmp_path, ["x"], pid="999"), proc=tmp_path / "proc") is None  # gone
    assert report.controller_qps(_bed(tmp_path, ["x"], pid="not a pid"), proc=tmp_path / "proc") is None
    assert report.controller_qps(str(tmp_path / "elsewhere" / "kubeconfig")) is None  # not a local bed


def test_the_file_create_probe_times_creates_and_leaves_nothing(tmp_path: Path) -> None:
    us = report.file_create_us(tmp_path, count=50)
    assert 0 < us < 1_000_000
    assert list(tmp_path.iterdir()) == []  # its files and dir removed again


def test_the_header_says_what_the_machine_record_holds() -> None:
    machine = {"bed_controller_qps": 100, "file_create_us_at_start": 61.4}
    assert report._qps(machine) == " (the bed's controller manager at 100 requests/s)"
    assert report._file_create(machine) == ", a file created in 61 us"
    assert report._qps({}) == report._file_create({"file_create_us_at_start": None}) == ""  # older results
