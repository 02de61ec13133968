"""Which ansible-core minors the warm path's speed-ups (template cache, parsed files, local temp dirs,
shared copies) are written for: on older ones each shape check reports why and the speed-up stays off. And
``in_child``, for the tests that install a hook: it changes Ansible for the whole process, so they run it in
a new interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from hybrid_operator.ansible.compat.versions import ansible_version

FIRST = (2, 19)  # 2.18's templating, loader and action plugins have other shapes (no ansible._internal)
OFF_HERE = ansible_version()[:2] < FIRST


def in_child(script: str, *args: str, env: Mapping[str, str] | None = None) -> Any:
    """Run ``script`` in a new interpreter (a hook changes Ansible for its whole process) with ``args`` and
    this environment plus ``env``; the JSON of the last line it printed (its exit code checked to be 0)."""
    done = subprocess.run(
        [sys.executable, "-P", "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
