"""The warm executor against the ansible-runner one, on real Ansible (no cluster needed).

The same requests go through ``RunnerExecutor`` and ``WarmExecutor`` and must give the same
``RunResult``: counts, failed tasks (message and output), status, conditions, events, requeue. Then what
only forking can break: one run's extra vars or environment reaching the next, runs at the same time, a
timeout that must kill the whole run, a zygote that dies, artifacts kept within the same bounds.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hybrid_operator.ansible.compat import ansible_version
from hybrid_operator.ansible.results import RunResult
from hybrid_operator.ansible.running import ExecutorSettings, RunnerExecutor, RunRequest
from hybrid_operator.ansible.warm.client import ZygoteClient
from hybrid_operator.ansible.warm.executor import WarmExecutor, ZygoteError

pytestmark = pytest.mark.integration
ROLES = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "warm" / "roles"
GROUP, VERSION, KIND = "test.hybrid-operator.dev", "v1", "Warm"


def request(name: str = "obj", spec: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> RunRequest:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    obj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": meta, "spec": spec or {}}
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": name, "namespace": "ns"}
    return RunRequest(
        run_id=uuid.uuid4().hex[:12],
        group=GROUP,
        version=VERSION,
        kind=KIND,
        obj=obj,
        role="warm",
        env={"HYBRID_OPERATOR_OWNER": json.dumps(owner), **(env or {})},
        max_artifacts=3,
    )


def settings(root: Path, timeout: float = 300.0) -> ExecutorSettings:
    return ExecutorSettings(artifacts_root=root, timeout=timeout, roles_paths=(ROLES,), module_server=False)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunnerExecutor]:
    executor = RunnerExecutor(settings(tmp_path_factory.mktemp("runner")))
    yield executor
    executor.close()


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmExecutor]:
    executor = WarmExecutor(settings(tmp_path_factory.mktemp("warm")))
    executor.wait_until_ready()
    assert executor.off == ""  # the self-test passed: the comparisons below compare the warm path itself
    yield executor
    executor.close()


def outcome(result: RunResult) -> dict[str, Any]:
    """Everything in a RunResult that does not depend on timing."""
    return {
        "counts": (result.ok, result.changed, result.skipped, result.failures, result.unreachable),
        "rc": result.rc,
        "timed_out": result.timed_out,
        "error": result.error,
        "failed_tasks": [(t.task, t.message, t.output) for t in result.failed_tasks],
        "status": result.status,
        "conditions": result.conditions,
        "events": result.events,
        "requeue_after": result.requeue_after,
    }


def same_run(runner: RunnerExecutor, warm: WarmExecutor, req: RunRequest) -> tuple[RunResult, RunResult]:
    cold = runner.run(req)
    forked = warm.run(req)
    assert outcome(forked) == outcome(cold)
    return cold, forked


def test_a_successful_run_is_the_same(runner: RunnerExecutor, warm: WarmExecutor) -> None:
    cold, forked = same_run(runner, warm, request(spec={"x": 1}))
    assert forked.succeeded and cold.succeeded
    assert (forked.ok, forked.skipped) == (10, 4)  # when: false, the rescue block, the failing loop, the sleep
    assert forked.status == {"echoed": "", "x": "1", "mark": ""}
    assert forked.conditions[0]["reason"] == "Reconciled"
    assert [e.reason for e in forked.events] == ["Warmed"]
    assert forked.requeue_after == 45


def test_modules_in_workers_match_the_module_server(tmp_path: Path) -> None:
    runner = RunnerExecutor(replace(settings(tmp_path / "runner"), module_server=True))
    warm = WarmExecutor(replace(settings(tmp_path / "warm"), module_server=True))
    try:
        _cold, forked = same_run(runner, warm, request(name="modules", spec={"x": 5, "mode": "rescued"}))
        assert forked.succeeded and forked.status["x"] == "5"
    finally:
        warm.close()
        runner.close()


def test_modules_in_the_worker_are_the_same(tmp_path: Path) -> None:
    """Stock modules (a new interpreter each) against modules run in the warm executor's workers."""
    runner = RunnerExecutor(settings(tmp_path / "runner"))
    warm = WarmExecutor(replace(settings(tmp_path / "warm"), module_server=True))
    dirs = {"runner": tmp_path / "out-runner", "warm": tmp_path / "out-warm"}
    for path in dirs.values():
        path.mkdir()
    try:
        for name, spec in (("modules", {"x": 3}), ("dying", {"mode": "die"})):
            req = replace(request(name=name, spec=spec), role="modules")
            cold = runner.run(replace(req, env={**req.env, "MODULES_DIR": str(dirs["runner"])}))
            forked = warm.run(replace(req, env={**req.env, "MODULES_DIR": str(dirs["warm"])}))
            assert outcome(forked) == outcome(cold)
            assert forked.succeeded, forked.failed_tasks
        status = forked.status
        assert status["command"] == "out from-the-task|err|0" and status["failing"] == "3|nope"
        size = len("x=unset\n")  # a template's number: a string on 2.18 (no native types), an int later
        assert status["copied"] is True and status["size"] == (str(size) if ansible_version()[:2] < (2, 19) else size)
        assert status["k8s"].startswith("True|")
        killed = "MODULE FAILURE" if ansible_version()[:2] < (2, 19) else "Module result deserialization failed"
        assert status["killed"].startswith(f"137|{killed}")
        where = warm.run(replace(request(name="where", spec={"mode": "where"}), role="modules"))
        assert "hybrid_operator.ansible.warm.zygote" in where.status["where"]  # the module ran in a worker's fork
        cold_where = runner.run(replace(request(name="where", spec={"mode": "where"}), role="modules"))
        assert "zygote" not in cold_where.status["where"]
    finally:
        warm.close()
        runner.close()


@pytest.mark.parametrize("broken", ["reset", "module-side"])
def test_a_warm_path_that_differs_from_ansibles_switches_itself_off(tmp_path: Path, broken: str) -> None:
    """A zygote with one touchpoint broken, as a new ansible-core could break it: the start-up self-test
    sees the difference, the executor says why once, and every run goes through ansible-runner."""
    server = (str(Path(__file__).resolve().parents[1] / "fixtures" / "zygotes" / "broken.py"), broken)
    warm = WarmExecutor(replace(settings(tmp_path / "warm"), module_server=True), server)
    runner = RunnerExecutor(settings(tmp_path / "runner"))
    try:
        with pytest.raises(ZygoteError, match="self-test: a forked run differs"):
            warm.wait_until_ready()
        assert warm.ready() == (True, "ok") and warm.zygote_pid is None
        req = request(name="off", spec={"x": 4})
        cold, fallback = runner.run(req), warm.run(req)
        assert outcome(fallback) == outcome(cold) and fallback.succeeded and fallback.status["x"] == "4"
    finally:
        warm.close()
        runner.close()


def test_a_failed_run_is_the_same(runner: RunnerExecutor, warm: WarmExecutor) -> None:
    cold, forked = same_run(runner, warm, request(name="broken", spec={"mode": "fail"}))
    assert not forked.succeeded and forked.rc == 2
    assert [t.message for t in forked.failed_tasks] == ["item 2 failed for broken"]
    assert _stdout(warm, forked) == _stdout(runner, cold)  # byte for byte, terminal line ends included


def test_includes_nested_blocks_and_handlers_are_the_same(runner: RunnerExecutor, warm: WarmExecutor) -> None:
    cold, forked = same_run(runner, warm, replace(request(name="structure"), role="structure"))
    assert forked.succeeded and forked.status == {
        "included": "a,b,c",
        "rescued": "Fail inside",
        "looped": "A,B,C",
        "done": True,
    }
    assert _stdout(warm, forked) == _stdout(runner, cold)  # handlers, includes, rescue and always in order


def test_a_rescued_failure_is_the_same(runner: RunnerExecutor, warm: WarmExecutor) -> None:
    _cold, forked = same_run(runner, warm, request(spec={"mode": "rescued"}))
    assert forked.succeeded and forked.failed_tasks == []


def test_jinja_in_the_spec_stays_literal(runner: RunnerExecutor, warm: WarmExecutor) -> None:
    _cold, forked = same_run(runner, warm, request(spec={"message": "{{ 7 * 6 }}"}))
    assert forked.status["echoed"] == "{{ 7 * 6 }}"


def test_extra_vars_of_one_run_do_not_reach_the_next(runner: RunnerExecutor, warm: WarmExecutor) -> None:
    assert warm.run(request(spec={"x": 1})).status["x"] == "1"
    assert warm.run(request(spec={"x": 2})).status["x"] == "2"
    _cold, forked = same_run(runner, warm, request(spec={}))
    assert forked.status["x"] == "unset"


def test_environment_of_one_run_does_not_reach_the_next(runner: RunnerExecutor, warm: WarmExecutor) -> None:
    assert warm.run(request(env={"WARM_MARK": "first"})).status["mark"] == "first"
    _cold, forked = same_run(runner, warm, request())
    assert forked.status["mark"] == ""


def test_runs_at_the_same_time_stay_apart(runner: RunnerExecutor, warm: WarmExecutor) -> None:
    requests = [request(name=f"obj{i}", spec={"x": i}, env={"WARM_MARK": f"m{i}"}) for i in range(4)]
    results: dict[int, RunResult] = {}

    def run(i: int) -> None:
        results[i] = warm.run(requests[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    baseline = outcome(runner.run(requests[0]))
    for i, result in results.items():
        assert result.status == {"echoed": "", "x": str(i), "mark": f"m{i}"}
        assert outcome(result)["counts"] == baseline["counts"]
    assert outcome(results[0]) == baseline
    assert len(results) == 4


def _processes_with(args: list[str]) -> list[int]:
    wanted = "\0".join(args).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().rstrip(b"\0") == wanted:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("modules_in_worker", [False, True])
def test_a_timeout_kills_the_whole_run(tmp_path: Path, modules_in_worker: bool) -> None:
    # An argument no other process has (the other parametrization may run beside this one on another
    # test worker): how we find the module's `sleep`.
    seconds = "47.31" if modules_in_worker else "47.32"
    spec = {"mode": "sleep", "sleepSeconds": seconds}
    warm = WarmExecutor(replace(settings(tmp_path / "warm", timeout=6), module_server=modules_in_worker))
    short_runner = RunnerExecutor(settings(tmp_path / "runner", timeout=6))
    try:
        warm.wait_until_ready()
        zygote = warm.zygote_pid
        forked = warm.run(request(spec=spec))
        assert forked.timed_out and forked.rc == 254 and not forked.succeeded
        time.sleep(0.5)
        # Ansible's workers make their own process groups: killing the run's group alone would leave
        # the module (and its `sleep`) running.
        assert _processes_with(["sleep", seconds]) == []
        assert warm.ready() == (True, "ok") and warm.zygote_pid == zygote  # only the run was killed
        cold = short_runner.run(request(spec=spec))
        assert (cold.timed_out, cold.rc) == (forked.timed_out, forked.rc)
        # ansible-runner kills the run's process group only; what its workers ran is stopped after it too.
        assert _processes_with(["sleep", seconds]) == []
    finally:
        warm.close()
        short_runner.close()
        for pid in _processes_with(["sleep", seconds]):  # what ansible-runner's timeout leaves behind
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("kind", ["warm", "runner"])
def test_a_timeout_stops_what_the_run_started_outside_its_tree(tmp_path: Path, kind: str) -> None:
    """A hung run that first started a command in a session of its own: the command left the run's process
    tree when its shell ended, and is stopped at the timeout all the same (found by the run's mark)."""
    hung, detached = ("47.41", "47.42") if kind == "warm" else ("47.43", "47.44")  # this test's alone
    spec = {"sleepSeconds": hung, "detachedSeconds": detached}
    executor = (WarmExecutor if kind == "warm" else RunnerExecutor)(settings(tmp_path, timeout=6))
    try:
        thread, results = _in_background(executor, replace(request(spec=spec), role="detach"))
        deadline = time.monotonic() + 60
        while not _processes_with(["sleep", detached]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with(["sleep", detached]), "the run never started its detached command"
        thread.join(60)
        assert len(results) == 1 and results[0].timed_out and not results[0].succeeded
        assert _sleeps_gone(hung, detached)
    finally:
        executor.close()
        _kill_sleeps(hung, detached)


def test_a_dead_zygote_takes_what_its_runs_detached_with_it(tmp_path: Path) -> None:
    """The zygote dies under a run that started a command in a session of its own: the executor stops the
    run's tree and, found by the run's mark, the detached command."""
    hung, detached = "47.45", "47.46"  # this test's alone
    spec = {"sleepSeconds": hung, "detachedSeconds": detached}
    warm = WarmExecutor(settings(tmp_path))
    try:
        warm.wait_until_ready()
        zygote = warm.zygote_pid
        assert zygote is not None
        thread, results = _in_background(warm, replace(request(spec=spec), role="detach"))
        deadline = time.monotonic() + 60
        while not (_processes_with(["sleep", detached]) and _processes_with(["sleep", hung])):
            assert time.monotonic() < deadline, "the run never got to its hang"
            time.sleep(0.05)
        os.kill(zygote, signal.SIGKILL)
        thread.join(60)
        assert len(results) == 1 and not results[0].succeeded
        assert _sleeps_gone(hung, detached)
    finally:
        warm.close()
        _kill_sleeps(hung, detached)


def _in_background(
    executor: RunnerExecutor | WarmExecutor, run: RunRequest
) -> tuple[threading.Thread, list[RunResult]]:
    """``executor.run(run)`` in a thread of its own, started; its result lands in the list."""
    results: list[RunResult] = []
    thread = threading.Thread(target=lambda: results.append(executor.run(run)))
    thread.start()
    return thread, results


def _sleeps_gone(*seconds: str, within: float = 5.0) -> bool:
    """Whether no ``sleep <s>`` for any of ``seconds`` is left, waiting up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while any(_processes_with(["sleep", s]) for s in seconds):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _kill_sleeps(*seconds: str) -> None:
    """What a failed test left running."""
    for s in seconds:
        for pid in _processes_with(["sleep", s]):
            os.kill(pid, signal.SIGKILL)


def _ancestor_below(pid: int, parent: int) -> int:
    """The ancestor of ``pid`` whose parent is ``parent`` (``pid`` itself if it is one)."""
    while True:
        ppid = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        if ppid == parent:
            return pid
        if ppid <= 1:
            raise AssertionError(f"{pid} is not below {parent}")
        pid = ppid


def test_a_run_killed_before_it_says_it_is_done_is_reported_when_reaped(tmp_path: Path) -> None:
    """A run reports its end itself, once its output is complete; one that dies before it can (killed by a
    signal) is reported from its exit status, and the zygote goes on serving."""
    seconds = "47.33"  # no other test's `sleep` has it
    warm = WarmExecutor(settings(tmp_path))
    try:
        warm.wait_until_ready()
        zygote = warm.zygote_pid
        assert zygote is not None
        thread, results = _in_background(warm, request(spec={"mode": "sleep", "sleepSeconds": seconds}))
        deadline = time.monotonic() + 60
        while not (sleeping := _processes_with(["sleep", seconds])) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sleeping, "the run's sleep never started"
        os.kill(_ancestor_below(sleeping[0], zygote), signal.SIGKILL)  # the run's ansible-playbook
        thread.join(60)
        assert len(results) == 1
        killed = results[0]
        assert (killed.rc, killed.timed_out, killed.succeeded) == (-signal.SIGKILL, False, False)
        assert warm.zygote_pid == zygote and warm.ready() == (True, "ok")
        after = warm.run(request(spec={"x": 3}))
        assert after.succeeded and after.rc == 0 and after.status["x"] == "3"
    finally:
        warm.close()
        for pid in _processes_with(["sleep", seconds]):  # its module's sleep is not in the killed process
            os.kill(pid, signal.SIGKILL)


def test_a_dead_zygote_is_reported_and_replaced(tmp_path: Path) -> None:
    warm = WarmExecutor(settings(tmp_path))
    try:
        assert warm.run(request(spec={"x": 1})).succeeded
        assert warm.ready() == (True, "ok")
        pid = warm.zygote_pid
        assert pid is not None
        # The local temp dir Ansible made for the zygote (its shared payloads), which it removes at a clean
        # exit only: the zygote notes it in its working dir.
        local_tmp = Path((Path(f"/proc/{pid}/cwd").resolve() / "local-tmp").read_text(encoding="utf-8"))
        assert local_tmp.name.startswith(f"ansible-local-{pid}") and local_tmp.is_dir()
        _kill(pid, until=lambda: not warm.ready()[0])
        ready, why = warm.ready()
        assert not ready and "died" in why
        deadline = time.monotonic() + 10  # the executor fails its runs first, then removes the dir
        while local_tmp.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not local_tmp.exists()  # removed for the killed zygote
        result = warm.run(request(spec={"x": 2}))
        assert result.succeeded and result.status["x"] == "2"
        assert warm.ready() == (True, "ok") and warm.zygote_pid != pid
    finally:
        warm.close()


def test_a_dead_zygote_whose_reader_has_not_noticed_yet_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that comes between the zygote's end and its reader's end of file goes to a new zygote.

    On a busy machine the process can be reaped (``poll``) before the reader thread has read the end of its
    socket and said why: the reader is held back here until the run is over, so that moment is certain.
    """
    noticed = threading.Event()
    died = ZygoteClient._died

    def late(client: ZygoteClient, reason: str) -> None:
        noticed.wait(30)
        died(client, reason)

    warm = WarmExecutor(settings(tmp_path))
    try:
        assert warm.run(request(spec={"x": 1})).succeeded
        monkeypatch.setattr(ZygoteClient, "_died", late)
        pid = warm.zygote_pid
        assert pid is not None
        _kill(pid, until=lambda: not warm.ready()[0])
        assert warm.ready() == (False, "the warm Ansible process died")  # ended, its reader still silent
        monkeypatch.setattr(ZygoteClient, "_died", died)
        result = warm.run(request(spec={"x": 2}))
        assert result.succeeded and result.status["x"] == "2"
        assert warm.ready() == (True, "ok") and warm.zygote_pid != pid
    finally:
        noticed.set()
        warm.close()


def test_a_run_handed_to_a_zygote_that_died_just_before_goes_to_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zygote dies between the run's check that it is alive and the hand-over: nothing of the run has
    started, so a new zygote runs it, once, instead of the run failing."""
    warm = WarmExecutor(settings(tmp_path))
    try:
        assert warm.run(request(spec={"x": 1})).succeeded
        dead = warm._zygote
        assert dead is not None and dead.pid is not None
        _kill(dead.pid, until=lambda: bool(dead.error))
        assert dead.error
        looked_up = WarmExecutor._zygote_for_run
        first = [True]

        def late_look_up(self: WarmExecutor, *args: float) -> ZygoteClient | None:
            if first.pop() if first else False:  # the run's own look-up, made before the zygote died
                return dead
            return looked_up(self, *args)

        monkeypatch.setattr(WarmExecutor, "_zygote_for_run", late_look_up)
        result = warm.run(request(spec={"x": 2}))
        assert result.succeeded and result.status["x"] == "2"
        assert warm.zygote_pid not in (None, dead.pid) and warm.ready() == (True, "ok")
    finally:
        warm.close()


def test_ansible_settings_in_a_runs_environment_are_honoured(runner: RunnerExecutor, warm: WarmExecutor) -> None:
    """Ansible reads ANSIBLE_* once per process: such a run is exec'ed fresh, with the same result."""
    quiet = {"ANSIBLE_DISPLAY_SKIPPED_HOSTS": "false", "ANSIBLE_DISPLAY_OK_HOSTS": "false"}
    cold, forked = same_run(runner, warm, request(name="quiet", spec={"mode": "fail"}, env=quiet))
    assert "ok: [localhost]" not in _stdout(warm, forked) and "ok: [localhost]" not in _stdout(runner, cold)
    loud = warm.run(request(name="loud"))
    assert "ok: [localhost]" in _stdout(warm, loud)


def _run_dirs(executor: RunnerExecutor | WarmExecutor, name: str) -> list[Path]:
    parent = executor.store.root / GROUP / VERSION / KIND / "ns" / name
    return sorted(p for p in parent.iterdir() if p.is_dir())


def _kill(pid: int, until: Callable[[], bool]) -> None:
    """SIGKILL ``pid`` (a zygote) and wait, up to 10 s, until the executor shows it (``until``)."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not until() and time.monotonic() < deadline:
        time.sleep(0.05)


def _stdout(executor: RunnerExecutor | WarmExecutor, result: RunResult) -> str:
    for run_dir in executor.store.root.glob(f"{GROUP}/{VERSION}/{KIND}/ns/*/*-{result.run_id}"):
        return (run_dir / "artifacts" / result.run_id / "stdout").read_text(encoding="utf-8")
    raise AssertionError(f"no artifacts for run {result.run_id}")


def _shape(run_dir: Path) -> tuple[list[str], int]:
    """The artifact files of a run (names only) and how many job events it kept."""
    (artifacts,) = (run_dir / "artifacts").iterdir()
    names = sorted(p.name for p in artifacts.iterdir())
    return names, len(list((artifacts / "job_events").glob("*.json")))


def test_artifacts_are_the_same_and_bounded_the_same_way(runner: RunnerExecutor, warm: WarmExecutor) -> None:
    for _ in range(4):
        same_run(runner, warm, request(name="bounded", spec={"x": 1}, env={"WARM_TOKEN": "hush-hush"}))
    cold_dirs, warm_dirs = _run_dirs(runner, "bounded"), _run_dirs(warm, "bounded")
    assert len(cold_dirs) == len(warm_dirs) == 3  # max_artifacts
    assert [_shape(d) for d in warm_dirs] == [_shape(d) for d in cold_dirs]
    names, _events = _shape(warm_dirs[-1])
    assert names == ["command", "fact_cache", "job_events", "rc", "status", "stderr", "stdout"]
    for run_dir in warm_dirs:
        command = json.loads(next((run_dir / "artifacts").glob("*/command")).read_text())
        assert "WARM_TOKEN" in command["env"]
        assert "hush-hush" not in json.dumps(command)
    cold_command = json.loads(next((cold_dirs[-1] / "artifacts").glob("*/command")).read_text())
    warm_command = json.loads(next((warm_dirs[-1] / "artifacts").glob("*/command")).read_text())
    assert warm_command["env"] == cold_command["env"]
    assert warm.store.total_bytes > 0


def test_the_result_is_handed_on_before_the_artifacts_and_they_are_all_there_after(
    runner: RunnerExecutor, warm: WarmExecutor
) -> None:
    """``on_result`` (the reconciler writes the status there) gets the whole result, the one ``run`` returns,
    before the job event files exist; when ``run`` returns they are all there, as ansible-runner's are."""
    seen: list[tuple[RunResult, int]] = []

    def on_result(result: RunResult) -> None:
        (run_dir,) = [d for d in _run_dirs(warm, "handed") if d.name.endswith(result.run_id)]
        seen.append((result, len(list((run_dir / "artifacts").glob("*/job_events/*.json")))))

    req = request(name="handed", spec={"x": 2})
    returned = warm.run(replace(req, on_result=on_result))
    cold = runner.run(req)
    ((handed, files_then),) = seen
    assert handed is returned and outcome(handed) == outcome(cold)
    assert handed.duration > 0
    assert files_then == 0
    (run_dir,) = [d for d in _run_dirs(warm, "handed") if d.name.endswith(returned.run_id)]
    (cold_dir,) = [d for d in _run_dirs(runner, "handed") if d.name.endswith(cold.run_id)]
    assert _shape(run_dir) == _shape(cold_dir)
    assert (next((run_dir / "artifacts").glob("*/status")).read_text()) == "successful"


def test_an_error_of_whoever_takes_the_result_comes_out_after_the_artifacts(warm: WarmExecutor) -> None:
    def on_result(_result: RunResult) -> None:
        raise RuntimeError("the status write failed")

    req = request(name="raising", spec={"x": 3})
    with pytest.raises(RuntimeError, match="the status write failed"):
        warm.run(replace(req, on_result=on_result))
    (run_dir,) = [d for d in _run_dirs(warm, "raising") if d.name.endswith(req.run_id)]
    names, events = _shape(run_dir)
    assert names == ["command", "fact_cache", "job_events", "rc", "status", "stderr", "stdout"]
    assert events > 0
    # The store counted the run (its bytes) although the caller failed.
    assert warm.store.total_bytes > 0 and run_dir not in warm.store._live


def test_artifacts_that_cannot_be_written_cost_them_not_the_result(warm: WarmExecutor) -> None:
    """The run's job_events dir gone between the result and the files (someone cleaned the disk): the files
    cannot be written; the run's result stands and the store accounts the run all the same."""
    import shutil

    def on_result(result: RunResult) -> None:
        (run_dir,) = [d for d in _run_dirs(warm, "vanished") if d.name.endswith(result.run_id)]
        for events_dir in (run_dir / "artifacts").glob("*/job_events"):
            shutil.rmtree(events_dir)

    req = request(name="vanished", spec={"x": 4})
    result = warm.run(replace(req, on_result=on_result))
    assert result.succeeded and result.status["x"] == "4"
    (run_dir,) = [d for d in _run_dirs(warm, "vanished") if d.name.endswith(req.run_id)]
    assert not list((run_dir / "artifacts").glob("*/job_events"))
    assert run_dir not in warm.store._live  # accounted all the same
