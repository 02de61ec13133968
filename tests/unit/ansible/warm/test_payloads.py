"""The modules' payloads the zygote's builder prepares for the runs (``warm.payloads``): a run that finds one
builds nothing, what it finds is what it would have built itself (the same files, byte for byte, in the zip),
only shareable modules are built, at most ``MAX_MODULES``; and the zygote reaps its builder, or stops it when
the zygote stops. Building configures Ansible's collection loader for the whole process, so those parts run
in a child interpreter (real ansible-core, real collections)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.warm import payloads, zygote
from tests.unit.ansible.warm.speedups import in_child

REPO = Path(__file__).resolve().parents[4]

_CHILD = r"""
import base64, hashlib, io, json, os, sys, zipfile
from ansible import constants
from ansible.executor import module_common
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader, module_loader
from ansible.template import Templar
from hybrid_operator.ansible import compat
from hybrid_operator.ansible.warm import inworker, payloads

init_plugin_loader()
shared, names, shareable, run_module = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
payloads.MAX_MODULES = int(os.environ.get("TEST_MAX_MODULES", payloads.MAX_MODULES))
policy = compat.ModulePolicy(inworker.importable_as, inworker.shareable, inworker.run_wrapper)
compat.hook_modules(policy, shared)
built, failed = payloads.prebuild(names, inworker.shareable if shareable == "yes" else lambda path: False)
finds = []
original = module_common.recursive_finder
def counting(name, *args, **kwargs):
    finds.append(name)
    return original(name, *args, **kwargs)
module_common.recursive_finder = counting
if run_module:  # what a run's task does next: build the module's wrapper, as ActionBase._configure_module does
    module_common.modify_module(
        module_name=run_module,
        module_path=module_loader.find_plugin_with_context(run_module).plugin_resolved_path,
        module_args={"kind": "Deployment", "_ansible_check_mode": False},
        templar=Templar(loader=DataLoader()),
        task_vars={"ansible_python_interpreter": sys.executable, "inventory_hostname": "localhost"},
        module_compression=constants.config.get_config_value("DEFAULT_MODULE_COMPRESSION"),
    )
cached_type = getattr(module_common, "_CachedModule", None)  # 2.18 keeps the base64 zip itself
entries = {}
for root, _dirs, files in os.walk(shared):
    for name in files:
        if name.endswith((".lock", "-part")):
            continue
        path = os.path.join(root, name)
        data = cached_type.load(path).zip_data if cached_type else open(path, "rb").read()
        archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(data)))
        entries[name] = {m: hashlib.sha256(archive.read(m)).hexdigest() for m in archive.namelist()}
print(json.dumps({"built": built, "failed": failed, "finds": finds, "entries": entries}))
"""


def _child(tmp_path: Path, names: list[str], run_module: str = "", shareable: bool = True, **env: str) -> Any:
    shared = tmp_path / f"shared-{len(list(tmp_path.iterdir()))}"
    collections = str(REPO / "hybrid_operator" / "collections")
    arguments = (str(shared), __import__("json").dumps(names), "yes" if shareable else "no", run_module)
    return in_child(_CHILD, *arguments, env={"ANSIBLE_COLLECTIONS_PATH": collections, **env})


def test_a_run_finds_the_payload_built_for_it_and_it_is_the_one_it_would_have_built(tmp_path: Path) -> None:
    ahead = _child(tmp_path, ["ansible.builtin.import_tasks", "kubernetes.core.k8s_info"], "kubernetes.core.k8s_info")
    alone = _child(tmp_path, [], "kubernetes.core.k8s_info")
    assert ahead["built"] == 1 and ahead["failed"] == []  # import_tasks names no module of its own
    assert ahead["finds"] == []  # the run's module build read the prepared payload
    assert alone["finds"] == ["kubernetes.core.k8s_info"]  # without it the run walks the module's imports
    assert len(ahead["entries"]) == 1
    assert ahead["entries"] == alone["entries"]  # the same cache entry, the same files in its zip
    (members,) = ahead["entries"].values()
    assert any("module_utils/k8s" in name for name in members)


def test_only_modules_the_runs_share_are_built_and_names_of_nothing_are_skipped(tmp_path: Path) -> None:
    names = ["kubernetes.core.k8s", "no.such.module", "ansible.builtin.when", "../../etc/passwd", "", "a.b.c.d"]
    refused = _child(tmp_path, names, shareable=False)
    assert (refused["built"], refused["failed"], refused["entries"]) == (0, [], {})
    garbage = _child(tmp_path, names[1:])
    assert (garbage["built"], garbage["failed"], garbage["entries"]) == (0, [], {})


def test_at_most_max_modules_are_built_in_the_order_the_roles_name_them(tmp_path: Path) -> None:
    names = ["kubernetes.core.k8s_info", "kubernetes.core.k8s_info", "ansible.builtin.copy", "kubernetes.core.k8s"]
    result = _child(tmp_path, names, TEST_MAX_MODULES="2")
    assert result["built"] == 2  # the repeated name counts once
    assert sorted(name.split("-")[0] for name in result["entries"]) == [
        "ansible.modules.copy",
        "ansible_collections.kubernetes.core.plugins.modules.k8s_info",
    ]


def test_the_switch_forks_no_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(payloads.DISABLE_ENV, "0")
    assert payloads.fork_builder(["kubernetes.core.k8s"], lambda path: True, []) is None
    monkeypatch.delenv(payloads.DISABLE_ENV)
    assert payloads.fork_builder([], lambda path: True, []) is None  # nothing to build: no fork either


def _server_with_builder(monkeypatch: pytest.MonkeyPatch, seconds: float) -> zygote.ZygoteServer:
    monkeypatch.setattr(payloads, "prebuild", lambda names, shareable: (time.sleep(seconds), (len(names), []))[1])
    ours, theirs = socket.socketpair()
    server = zygote.ZygoteServer(theirs)
    server._builder = payloads.fork_builder(["a.b.c"], lambda path: True, [ours.fileno()])
    assert server._builder is not None
    return server


def test_the_zygote_reaps_its_builder_and_forgets_its_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    server = _server_with_builder(monkeypatch, 0.0)
    deadline = time.monotonic() + 30
    while server._builder is not None and time.monotonic() < deadline:
        server._reap()
        time.sleep(0.01)
    assert server._builder is None  # reaped: a later stop never signals a pid that may be another's now


def test_a_zygote_that_stops_stops_a_builder_still_at_work(monkeypatch: pytest.MonkeyPatch) -> None:
    server = _server_with_builder(monkeypatch, 60.0)
    pid = server._builder
    assert pid is not None
    server.stop_all()
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)  # killed, not left building for a zygote that is gone
