"""Another local user against the operator, on the real test bed: files planted in the shared temp dir.

kubernetes.core keeps its API discovery cache in the temp dir, named after the API address and the user
(``k8srcp-<sha256 of "address-user">.json``), and a module that finds that file maps kinds to API paths with
what it says. In a shared ``/tmp`` anyone can write it first: the address is the run proxy's (logged, and
one of ~28,000 ephemeral ports), and a planted cache could map a kind to another resource's API path (a
Deployment to the namespace's Secrets, say) for every module of every run.
Runs therefore get the executor's own private ``TMPDIR``; here the operator's temp dir is a stand-in for
``/tmp``, every name the module could compute is planted there before the first run, and each executor's
run must succeed without reading, replacing or adding a file there.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from tests.integration.conftest import Objects, wait_until
from tests.integration.test_foo import G, P, V, foo

pytestmark = pytest.mark.integration


def _cache_names(address: str) -> set[str]:
    """Every name kubernetes.core's Discoverer could give its cache for this API address
    (``client/discovery.py``: the login name, else a non-zero uid, else $USERNAME, else none)."""
    users: set[str | None] = {None, str(os.getuid()), getpass.getuser(), os.environ.get("USERNAME")}
    with contextlib.suppress(OSError):
        users.add(os.getlogin())
    ids = {address if not user else f"{address}-{user}" for user in users}
    return {f"k8srcp-{hashlib.sha256(i.encode()).hexdigest()}.json" for i in ids}


@pytest.fixture
def shared() -> Iterator[Path]:
    """A stand-in for /tmp (short: the module server's socket lives below it), removed after the operator."""
    path = Path(tempfile.mkdtemp(prefix="hyop-shared-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("executor", ["warm", "runner"])
def test_a_discovery_cache_planted_in_the_shared_temp_dir_is_never_read(
    shared: Path, operator, objects: Objects, foo_watches: Path, executor: str
) -> None:
    running = operator(foo_watches, "--executor", executor, env={"TMPDIR": str(shared)})
    found = wait_until(lambda: re.search(r"API proxy for runs listening on (\S+)", running.log()), 30, "the proxy")
    planted = json.dumps({"library_version": kubernetes.__version__, "resources": {}, "planted": "marker"})
    names = _cache_names(found.group(1).rstrip("/"))
    for name in names:
        (shared / name).write_text(planted)

    objects.create(G, V, P, foo("planted", "planted"))

    objects.wait_successful(G, V, P, "planted", 90)
    assert objects.apps.read_namespaced_deployment("planted", objects.namespace).spec.replicas == 1
    for name in names:
        assert (shared / name).read_text() == planted, f"a module used {name}"
    caches = {p.name for p in shared.rglob("k8srcp-*.json") if p.parent == shared}
    assert caches == names, "a module wrote a discovery cache into the shared temp dir"
    assert executor != "warm" or "self-test passed" in running.log()
