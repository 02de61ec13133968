"""operator-sdk's Go ``ansible-operator``, the peer: its binary, and what it needs beside it to run.

The binary comes from ``bench/build-peer.sh`` (built from the Go module proxy once, then cached).

The peer learns what a run did from an ansible-runner event plugin that upstream ships inside its image
rather than on PyPI (``images/ansible-operator/ansible_runner_http`` in ansible-operator-plugins; it
POSTs every event to the operator's unix socket). Without it every run of the peer ends in "did not
receive playbook_on_stats event". ``support_path`` installs that plugin, copied from the very module
source the binary was built from, together with its one dependency (requests-unixsocket, pinned as
upstream's Pipfile pins it) into a cache directory that goes on the peer's ``PYTHONPATH`` only: the
project's virtualenv is never changed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

VERSION = os.environ.get("ANSIBLE_OPERATOR_VERSION", "v1.42.0")
MODULE = "github.com/operator-framework/ansible-operator-plugins"
REQUESTS_UNIXSOCKET = "requests-unixsocket==0.4.1"  # images/ansible-operator/Pipfile
ROOT = Path(__file__).resolve().parent.parent


class PeerUnavailable(Exception):
    """The peer cannot be run here; the message says why."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hybrid-operator"


def binary(explicit: str | None = None) -> Path:
    """The peer binary: ``explicit`` if given, else whatever build-peer.sh prints (building it once)."""
    if explicit:
        path = Path(explicit)
        if not os.access(path, os.X_OK):
            raise PeerUnavailable(f"{path} is not an executable")
        return path
    proc = subprocess.run(
        [str(ROOT / "bench" / "build-peer.sh")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ANSIBLE_OPERATOR_VERSION": VERSION},
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise PeerUnavailable(f"bench/build-peer.sh failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def version(path: Path) -> str:
    """The version built, and the Go it was built with (a build from the module proxy calls itself "unknown")."""
    proc = subprocess.run([str(path), "version"], capture_output=True, text=True, check=False, timeout=30)
    go = re.search(r'go version: "([^"]+)"', proc.stdout + proc.stderr)
    return f"{VERSION} (built with {go.group(1)})" if go else VERSION


def _module_dir() -> Path:
    """The ansible-operator-plugins module source in the Go module cache (downloaded if missing)."""
    env = {**os.environ, "GONOSUMDB": MODULE, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "auto"}
    try:
        proc = subprocess.run(
            ["go", "mod", "download", "-json", f"{MODULE}@{VERSION}"],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            cwd=cache_dir() if cache_dir().is_dir() else None,
            timeout=600,
        )
    except OSError as exc:
        raise PeerUnavailable(f"go is needed to fetch {MODULE}@{VERSION}: {exc}") from exc
    try:
        return Path(json.loads(proc.stdout)["Dir"])
    except (ValueError, KeyError) as exc:
        raise PeerUnavailable(f"go mod download {MODULE}@{VERSION} failed: {proc.stderr.strip()[-800:]}") from exc


def support_path(python: Path) -> Path:
    """A directory for the peer's PYTHONPATH holding upstream's ansible-runner event plugin."""
    target = cache_dir() / f"peer-python-{VERSION}"
    if (target / ".complete").exists():
        return target
    source = _module_dir() / "images" / "ansible-operator" / "ansible_runner_http" / "ansible_runner_http"
    if not (source / "events.py").is_file():
        raise PeerUnavailable(f"upstream's event plugin is not where it used to be: {source}")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(staging), REQUESTS_UNIXSOCKET],
        capture_output=True,
        text=True,
        check=False,
    )
    if pip.returncode != 0:
        raise PeerUnavailable(f"pip could not install {REQUESTS_UNIXSOCKET}: {pip.stderr.strip()[-800:]}")
    plugin = staging / "ansible_runner_http"
    plugin.mkdir()
    for module in source.glob("*.py"):  # file contents only: the module cache is read-only
        shutil.copyfile(module, plugin / module.name)
    # The metadata upstream's setup.py would produce: ansible-runner finds plugins by entry point.
    dist = staging / "ansible_operator_http_events-1.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ansible-operator-http-events\nVersion: 1.0.0\n")
    (dist / "entry_points.txt").write_text("[ansible_runner.plugins]\nhttp = ansible_runner_http\n")
    (dist / "top_level.txt").write_text("ansible_runner_http\n")
    (staging / ".complete").touch()
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target
