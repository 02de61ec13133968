"""The differential harness of the lean path (``hybrid_operator.ansible.warm.lean``): the same role and object
through Ansible's own steps and through the lean path, and what the outside world saw, compared.

What is compared, per run: what the API server received (method, path and query, body, in order: a
``RecordingProxy`` is the runs' API proxy), the ``RunResult`` (counts, failed tasks, the status and
conditions written, the Kubernetes Events, the requeue), the job events ansible-runner's consumers read (the
artifacts' ``job_events``), the ``stdout`` artifact byte for byte and the names of the artifact files. What
two runs of one role may differ in by nature is normalized first: ids and times (uuids, counters' creation
times, pids, durations), what the API server assigns (uids, resourceVersions, timestamps) and the namespace
each path ran in.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hybrid_operator.ansible.results import RunResult
from hybrid_operator.ansible.running import ExecutorSettings
from hybrid_operator.ansible.warm import lean
from hybrid_operator.ansible.warm.executor import WarmExecutor

LEAN_MINOR = (2, 21)  # the first ansible-core the lean path runs on (its in-process task path's)
# Job-event fields that name a run, a moment or a process, not what happened.
_EVENT_VOLATILE = frozenset({"uuid", "parent_uuid", "created", "pid", "runner_ident", "counter"})
_DATA_VOLATILE = frozenset(
    {"uuid", "playbook_uuid", "play_uuid", "task_uuid", "start", "end", "duration", "delta", "warm_process"}
)
# A file's times and identity, in a result of ``stat`` (a mapping with these keys): two runs make two files.
_FILE_IDENTITY = frozenset({"atime", "mtime", "ctime", "inode", "version", "dev"})
# What the API server assigns, in objects it returns and in bodies built from them.
_SERVER_ASSIGNED = frozenset(
    {
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "time",
        "lastTransitionTime",
        "lastUpdateTime",
        "lastHeartbeatTime",
        "managedFields",
        "clusterIP",
        "clusterIPs",
        # what a node reports of a pod
        "startTime",
        "startedAt",
        "finishedAt",
        "podIP",
        "podIPs",
        "hostIP",
        "hostIPs",
        "containerID",
        "imageID",
    }
)
# Discovery: what the client asks to learn the API's kinds, not what a role asked for. The lean path's warm
# client keeps what an earlier module of the run learnt, so it asks less (never more: checked).
_DISCOVERY = re.compile(r"/(api|apis)(/[^/?]+){0,2}/?(\?.*)?$")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Each executor's own scratch dir (where it writes the runs' playbooks): a name, not something that happened.
_SCRATCH = re.compile(r"/hyop-[0-9]+-[A-Za-z0-9_]+/")
# Ansible's remote temporary directories: a moment, a pid and a random number.
_ANSIBLE_TMP = re.compile(r"/ansible-tmp-[0-9.]+-[0-9]+-[0-9]+/")


@contextmanager
def lean_switched(on: bool) -> Iterator[None]:
    """The process environment a new executor's zygote starts from, with the lean path on or off."""
    saved = os.environ.get(lean.DISABLE_ENV)
    if on:
        os.environ.pop(lean.DISABLE_ENV, None)
    else:
        os.environ[lean.DISABLE_ENV] = "0"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(lean.DISABLE_ENV, None)
        else:
            os.environ[lean.DISABLE_ENV] = saved


@contextmanager
def executor_pair(settings: ExecutorSettings, lean_artifacts: Path) -> Iterator[tuple[WarmExecutor, WarmExecutor]]:
    """(Ansible's own steps, the lean path): two warm executors on ``settings``, the lean one keeping its
    artifacts in ``lean_artifacts``; both closed at the end."""
    engine = warm_executor(settings, on=False)
    try:
        lean_run = warm_executor(replace(settings, artifacts_root=lean_artifacts), on=True)
        try:
            yield engine, lean_run
        finally:
            lean_run.close()
    finally:
        engine.close()


@contextmanager
def recording_proxy(kubeconfig: str) -> Iterator[RecordingProxy]:
    recording = RecordingProxy(kubeconfig)
    try:
        yield recording
    finally:
        recording.stop()


def warm_executor(settings: ExecutorSettings, on: bool) -> WarmExecutor:
    """A ready warm executor whose runs take the lean path (``on``) or Ansible's own steps."""
    with lean_switched(on):
        executor = WarmExecutor(settings)
        executor.wait_until_ready()
    assert executor.off == "", executor.off
    return executor


@dataclass
class Seen:
    """What the outside world saw of one run."""

    result: RunResult
    events: list[dict[str, Any]]
    stdout: str
    files: list[str]
    requests: list[tuple[str, str, Any]] = field(default_factory=list)


def seen(executor: WarmExecutor, result: RunResult, requests: list[tuple[str, str, Any]] | None = None) -> Seen:
    """Read a finished run's artifacts (its private dir is found by its run id)."""
    (run_dir,) = list(executor.store.root.glob(f"**/*-{result.run_id}"))
    artifacts = run_dir / "artifacts" / result.run_id
    events = [json.loads(p.read_text(encoding="utf-8")) for p in (artifacts / "job_events").glob("*.json")]
    events.sort(key=lambda e: int(e["counter"]))
    files = sorted(p.name for p in artifacts.iterdir())
    return Seen(result, events, (artifacts / "stdout").read_text(encoding="utf-8"), files, list(requests or []))


def normalized(value: Any, names: Mapping[str, str], chance: tuple[re.Pattern[str], ...] = ()) -> Any:
    """``value`` with what legitimately differs between two runs replaced (see the module docstring);
    ``names``: strings to replace (a namespace, an object's uid) by a placeholder; ``chance``: patterns of
    what a role makes differ by itself (the time, a random password), each match replaced."""
    if isinstance(value, Mapping):
        file_result = {"inode", "mtime"} <= value.keys()
        return {
            normalized(str(k), names, chance): "<assigned>" if k in _SERVER_ASSIGNED else normalized(v, names, chance)
            for k, v in value.items()
            if k not in _DATA_VOLATILE and not (file_result and k in _FILE_IDENTITY)
        }
    if isinstance(value, list | tuple):
        return [normalized(v, names, chance) for v in value]
    if isinstance(value, str):
        for old, new in names.items():
            value = value.replace(old, new)
        for pattern in chance:
            value = pattern.sub("<by chance>", value)
        value = _ANSIBLE_TMP.sub("/ansible-tmp-<moment>/", value)
        return _SCRATCH.sub("/<scratch>/", _UUID.sub("<uuid>", value))
    return value


def differences(
    engine: Seen,
    lean_run: Seen,
    names: Mapping[str, str] | None = None,
    chance: tuple[re.Pattern[str], ...] = (),
) -> list[str]:
    """Everything the two runs showed the outside world differently (empty: the same); ``names`` and
    ``chance``: see ``normalized``."""
    names = names or {}
    found = []
    for what, a, b in (
        ("result", _outcome(engine.result), _outcome(lean_run.result)),
        ("job events", _events(engine.events, names), _events(lean_run.events, names)),
        ("stdout", engine.stdout, lean_run.stdout),
        ("artifact files", engine.files, lean_run.files),
        ("API requests", _asked(engine.requests), _asked(lean_run.requests)),
        ("discovery requests", [], _more_discovery(engine.requests, lean_run.requests)),
    ):
        a, b = normalized(a, names, chance), normalized(b, names, chance)
        if a != b:
            found.append(f"{what}: {_first_difference(a, b)}")
    return found


def _is_discovery(request: tuple[str, str, Any]) -> bool:
    method, target, _ = request
    return method == "GET" and _DISCOVERY.fullmatch(target) is not None and "/namespaces" not in target


def _asked(requests: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any]]:
    """The requests a role's tasks made, in order (discovery left out)."""
    return [r for r in requests if not _is_discovery(r)]


def _more_discovery(engine: list[tuple[str, str, Any]], lean_run: list[tuple[str, str, Any]]) -> list[str]:
    """Discovery paths the lean path asked for that Ansible's path never did (should be none)."""
    asked = {r[1] for r in engine if _is_discovery(r)}
    return sorted({r[1] for r in lean_run if _is_discovery(r)} - asked)


def _outcome(result: RunResult) -> dict[str, Any]:
    return {
        "counts": (result.ok, result.changed, result.skipped, result.failures, result.unreachable),
        "rc": result.rc,
        "timed_out": result.timed_out,
        "error": result.error,
        "failed_tasks": [(t.task, t.message, t.output) for t in result.failed_tasks],
        "status": result.status,
        "conditions": result.conditions,
        "events": [(e.type, e.reason, e.message) for e in result.events],
        "requeue_after": result.requeue_after,
    }


def _events(events: list[dict[str, Any]], names: Mapping[str, str]) -> list[Any]:
    return [normalized({k: v for k, v in e.items() if k not in _EVENT_VOLATILE}, names) for e in events]


def _first_difference(a: Any, b: Any, where: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key, "<missing>") != b.get(key, "<missing>"):
                return _first_difference(a.get(key, "<missing>"), b.get(key, "<missing>"), f"{where}.{key}")
    if isinstance(a, list) and isinstance(b, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _first_difference(x, y, f"{where}[{index}]")
        if len(a) != len(b):
            return f"{where or 'top'}: {len(a)} items on Ansible's path, {len(b)} on the lean path"
    text_a, text_b = json.dumps(a, default=str)[:400], json.dumps(b, default=str)[:400]
    return f"{where or 'top'}: Ansible's path {text_a}, lean path {text_b}"


class RecordingProxy:
    """The runs' API proxy (``proxy.server.ApiProxy``) in this process, recording each request it forwards:
    (method, path with its query, body as JSON or text), per run id."""

    def __init__(self, kubeconfig: str) -> None:
        from hybrid_operator.kube.client import Kube
        from hybrid_operator.proxy.server import ApiProxy

        self.proxy = ApiProxy(Kube.connect(kubeconfig), inject=True, on_child=lambda _child: None)
        self.requests: dict[str, list[tuple[str, str, Any]]] = {}
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        forward = self.proxy._forward

        def recorded(handler: Any, owner: Any, token: str, target: str, body: bytes | None) -> None:
            with self._lock:
                run = self._tokens.get(token, "?")
                self.requests.setdefault(run, []).append((str(handler.command), target, _body(body)))
            forward(handler, owner, token, target, body)

        self.proxy._forward = recorded  # type: ignore[method-assign]
        self.proxy.start()

    def env_for(self, obj: Mapping[str, Any], run_id: str, scratch: Path) -> dict[str, str]:
        """What ``reactor.reconciling`` puts in a run's environment: its owner and its own kubeconfig."""
        from hybrid_operator.kube.owners import Owner

        meta = obj["metadata"]
        owner = Owner(obj["apiVersion"], obj["kind"], meta["name"], meta["namespace"], meta["uid"])
        text = self.proxy.kubeconfig_for(owner, run_id)
        with self._lock:
            self._tokens[json.loads(text)["users"][0]["user"]["token"]] = run_id
        path = scratch / f"{run_id}.kubeconfig"
        path.write_text(text, encoding="utf-8")
        as_json = {"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name}
        as_json |= {"namespace": owner.namespace, "uid": owner.uid}
        return {"HYBRID_OPERATOR_OWNER": json.dumps(as_json), "KUBECONFIG": str(path), "K8S_AUTH_KUBECONFIG": str(path)}

    def of(self, run_id: str) -> list[tuple[str, str, Any]]:
        with self._lock:
            return list(self.requests.get(run_id, []))

    def stop(self) -> None:
        self.proxy.stop()


def _body(body: bytes | None) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")
