"""The docs' tutorials run as written: the shell blocks a page marks are extracted from it and run in order.

A page marks a fenced ``sh`` block for its test with an HTML comment on the line before the fence, which
neither MkDocs nor GitHub shows:

    <!-- test: first-operator -->             run it, in order, in the page's one shell
    <!-- test: first-operator background -->  start it in that shell with `&` (a second terminal, for
                                              `make run`); it is stopped when the page is done

Every marked block of a page becomes one bash script (``set -euo pipefail``), so ``cd`` and variables carry
over from block to block as they do for a reader typing them into one terminal; a background block runs as
``( block ) &`` with its output kept for the failure message. The script runs in an empty directory, with
the venv's ``hybrid-operator`` and the test bed's ``kubectl`` on PATH and KUBECONFIG set, and the
operator's metrics and probe ports moved off their defaults through the environment
(``HYBRID_OPERATOR_METRICS_BIND_ADDRESS`` and friends), so a page's ``make run`` never collides with
another operator on the machine. When it ends, its whole process group is stopped (the operator gets
SIGTERM, then SIGKILL), and what the page created is deleted even when a block failed.

Pages: docs/getting-started/first-operator.md (from an empty directory to a watched operator) and
docs/operator-sdk/migrating.md (operator-sdk's memcached-molecule-operator, its FROM line changed and
nothing else, run by hybrid-operator).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, free_port

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent
METRICS_MARKER = Path("/tmp/metricsbumped")  # as in test_upstream_compat.py
MARKER = re.compile(r"^<!-- test: (?P<name>[a-z0-9-]+)(?P<background> background)? -->$")


@dataclass(frozen=True)
class Block:
    line: int  # of the fence, in the page
    text: str
    background: bool


def blocks(page: Path, name: str) -> list[Block]:
    """The page's shell blocks marked ``<!-- test: NAME -->``, in order."""
    lines = page.read_text().splitlines()
    found = []
    for index, line in enumerate(lines):
        marker = MARKER.match(line.strip())
        if not marker or marker["name"] != name:
            continue
        fence = lines[index + 1].strip() if index + 1 < len(lines) else ""
        assert fence in ("```sh", "```bash"), f"{page}:{index + 1}: a test marker must stand right before a sh fence"
        end = next(i for i in range(index + 2, len(lines)) if lines[i].strip() == "```")
        found.append(Block(index + 2, "\n".join(lines[index + 2 : end]), bool(marker["background"])))
    return found


def script(page: Path, name: str, logs: Path) -> str:
    parts = ["set -euo pipefail"]
    for number, block in enumerate(blocks(page, name)):
        parts.append(f"# {page.relative_to(ROOT)}:{block.line}")
        if block.background:
            log = shlex.quote(str(logs / f"background-{number}.log"))
            parts.append(f"(\n{block.text}\n) >{log} 2>&1 &")
        else:
            parts.append(f"printf '\\n$ %s\\n' {shlex.quote(block.text)}\n{block.text}")
    return "\n".join(parts) + "\n"


def kubectl_path() -> str:
    """A directory to put first on PATH for kubectl: the test bed's (built with its API server, so they
    match; hack/local-cluster.sh env names it), else "" for the caller's own."""
    env = subprocess.run(
        [str(ROOT / "hack" / "local-cluster.sh"), "env"], capture_output=True, text=True, check=False, timeout=60
    ).stdout
    match = re.search(r"PATH=['\"]?([^'\"\n:]+)", env)
    if match and (Path(match.group(1)) / "kubectl").is_file():
        return match.group(1)
    if not shutil.which("kubectl"):
        pytest.skip("no kubectl on PATH, and the test bed has built none")
    return ""


@dataclass
class PageRun:
    done: subprocess.CompletedProcess[str]
    logs: Path

    def explain(self) -> str:
        background = "".join(f"\n--- {p.name}\n{p.read_text()[-6000:]}" for p in sorted(self.logs.glob("*.log")))
        return f"exit {self.done.returncode}\n{self.done.stdout[-8000:]}\n{self.done.stderr[-4000:]}{background}"


def run_page(page: Path, name: str, workdir: Path, kubeconfig: str, timeout: float = 900) -> PageRun:
    logs = workdir / "logs"
    logs.mkdir(parents=True)
    cwd = workdir / "reader"
    cwd.mkdir()
    path = os.pathsep.join(p for p in (str(BIN), kubectl_path(), os.environ.get("PATH", "")) if p)
    env = {
        **os.environ,
        "PATH": path,
        "KUBECONFIG": kubeconfig,
        "HYBRID_OPERATOR_METRICS_BIND_ADDRESS": f"127.0.0.1:{free_port()}",
        "HYBRID_OPERATOR_HEALTH_PROBE_BIND_ADDRESS": f"127.0.0.1:{free_port()}",
        "HYBRID_OPERATOR_USER_METRICS_BIND_ADDRESS": "127.0.0.1:0",
    }
    proc = subprocess.Popen(
        ["bash", "-c", script(page, name, logs)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the page's shell and everything it started: one process group to stop
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc.pid)
        out, err = proc.communicate()
        err += f"\n(the page did not finish within {timeout} s)"
    _stop(proc.pid)
    return PageRun(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), logs)


def _stop(group: int, grace: float = 40) -> None:
    """SIGTERM to the page's process group (the operator drains and exits 0), SIGKILL after ``grace``."""
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def kubectl(kubeconfig: str, *args: str) -> None:
    directory = kubectl_path()
    subprocess.run(
        [str(Path(directory) / "kubectl") if directory else "kubectl", "--kubeconfig", kubeconfig, *args],
        capture_output=True,
        check=False,
        timeout=180,
    )


@pytest.fixture
def cleanup(kubeconfig: str) -> Iterator[list[tuple[str, ...]]]:
    """kubectl commands run after the test, whatever happened (what is already gone is no error)."""
    commands: list[tuple[str, ...]] = []
    yield commands
    for command in commands:
        kubectl(kubeconfig, *command)


def test_every_marker_stands_before_a_sh_fence_and_names_a_tested_page() -> None:
    for page in sorted((ROOT / "docs").rglob("*.md")):
        names = {m["name"] for line in page.read_text().splitlines() if (m := MARKER.match(line.strip()))}
        assert names <= {"first-operator", "migrating"}, f"{page}: a marker no test runs: {names}"
        for name in names:
            assert blocks(page, name)


def test_your_first_operator_runs_as_written(kubeconfig: str, tmp_path: Path, cleanup: list[tuple[str, ...]]) -> None:
    page = ROOT / "docs" / "getting-started" / "first-operator.md"
    assert [b.background for b in blocks(page, "first-operator")].count(True) == 1
    cleanup += [
        ("delete", "namespace", "memcached-demo", "--ignore-not-found", "--wait=false"),
        ("delete", "crd", "memcacheds.cache.my.domain", "--ignore-not-found", "--wait=false"),
    ]
    started = time.monotonic()
    run = run_page(page, "first-operator", tmp_path, kubeconfig)
    assert run.done.returncode == 0, run.explain()
    (background,) = [i for i, b in enumerate(blocks(page, "first-operator")) if b.background]
    assert "my-memcached" in (run.logs / f"background-{background}.log").read_text(), run.explain()
    print(f"\nthe tutorial ran in {time.monotonic() - started:.0f} s")


def test_the_migration_page_runs_as_written(kubeconfig: str, tmp_path: Path, cleanup: list[tuple[str, ...]]) -> None:
    page = ROOT / "docs" / "operator-sdk" / "migrating.md"
    namespace = "memcached-migration"
    # A Memcached left behind (a failed block) keeps its finalizer with no operator to run it: drop it first.
    unfinalize = ("patch", "-n", namespace, "memcacheds.cache.example.com", "memcached-sample", "--type=merge")
    cleanup += [
        (*unfinalize, "-p", '{"metadata": {"finalizers": null}}'),
        ("delete", "namespace", namespace, "--ignore-not-found", "--wait=false"),
        ("delete", "-n", "default", "service", "test-service", "--ignore-not-found"),  # its secret role's
    ]
    METRICS_MARKER.unlink(missing_ok=True)  # its role bumps its metrics once per machine; test_upstream_compat
    started = time.monotonic()
    try:
        run = run_page(page, "migrating", tmp_path, kubeconfig)
    finally:
        METRICS_MARKER.unlink(missing_ok=True)
    assert run.done.returncode == 0, run.explain()
    assert "hello world" not in run.done.stderr
    assert re.search(r"^FROM registry\.example\.com/hybrid-operator-base:0\.1\.0$", run.done.stdout, re.M), (
        run.explain()
    )
    print(f"\nthe migration page ran in {time.monotonic() - started:.0f} s")
