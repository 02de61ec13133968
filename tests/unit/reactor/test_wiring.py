"""What run and reconcile FILE both build: a kind's context from the watch and the flags, and the runtime
(executor, the runs' proxy, the reconciler) that closes what it started, also when building it fails.
The executor and the proxy are fakes: nothing starts a process or binds a port."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from hybrid_operator.kube.client import Resource
from hybrid_operator.kube.objects import GVK
from hybrid_operator.lifecycle import Lifecycle
from hybrid_operator.reactor import wiring
from hybrid_operator.reactor.reconciling import Reconciler
from hybrid_operator.settings.config import Config, add_run_flags
from hybrid_operator.settings.watches import Target, Watch
from tests.fakes import FakeExecutor, FakeProxy

MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
RESOURCE = Resource(MEMCACHED, "memcacheds", True)
VERBOSITY_ENV = "ANSIBLE_VERBOSITY_MEMCACHED_CACHE_EXAMPLE_COM"


@pytest.fixture(autouse=True)
def _no_flag_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WATCHES_FILE", "KUBECONFIG", "LOG_FORMAT", "LOG_LEVEL", VERBOSITY_ENV):
        monkeypatch.delenv(name, raising=False)


def config(*argv: str) -> Config:
    parser = argparse.ArgumentParser()
    add_run_flags(parser)
    return Config.from_args(parser.parse_args(list(argv)), env={})


def watch(period: float | None = None) -> Watch:
    return Watch(gvk=MEMCACHED, target=Target(role="memcached"), reconcile_period=period)


def nothing(namespace: str, name: str) -> None:
    return None


# -- kind_context ---------------------------------------------------------------------------------------


def test_the_watchs_period_wins_over_the_flag() -> None:
    ctx = wiring.kind_context(config("--reconcile-period", "5m"), watch(period=30.0), RESOURCE, nothing)
    assert ctx.reconcile_period == 30.0


def test_without_a_watch_period_the_flag_decides() -> None:
    ctx = wiring.kind_context(config("--reconcile-period", "5m"), watch(), RESOURCE, nothing)
    assert ctx.reconcile_period == 300.0


def test_a_period_given_by_the_caller_wins_over_both() -> None:
    ctx = wiring.kind_context(config(), watch(period=30.0), RESOURCE, nothing, reconcile_period=0.0)
    assert ctx.reconcile_period == 0.0


def test_the_context_carries_the_watch_resource_lookup_and_event_callback() -> None:
    def on_event(event: dict[str, Any]) -> None:
        pass

    w = watch()
    ctx = wiring.kind_context(config(), w, RESOURCE, nothing, on_event=on_event)
    assert (ctx.watch, ctx.resource, ctx.lookup, ctx.on_event) == (w, RESOURCE, nothing, on_event)


def test_verbosity_is_the_flag_or_the_kinds_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert wiring.kind_context(config("--ansible-verbosity", "3"), watch(), RESOURCE, nothing).verbosity == 3
    monkeypatch.setenv(VERBOSITY_ENV, "5")
    assert wiring.kind_context(config("--ansible-verbosity", "3"), watch(), RESOURCE, nothing).verbosity == 5


@pytest.mark.parametrize(("level", "shown"), [("tasks", True), ("everything", True), ("nothing", False)])
def test_failed_output_is_logged_unless_run_events_are_off(level: str, shown: bool) -> None:
    ctx = wiring.kind_context(config("--ansible-log-events", level), watch(), RESOURCE, nothing)
    assert ctx.log_failed_output is shown


# -- build_runtime --------------------------------------------------------------------------------------


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch) -> FakeExecutor:
    fake = FakeExecutor()

    def build_executor(cfg: Config, *, extra_ansible_args: str = "", watches: Any = ()) -> FakeExecutor:
        fake.extra_ansible_args = extra_ansible_args
        fake.watches = list(watches)
        return fake

    monkeypatch.setattr(wiring, "build_executor", build_executor)
    return fake


def test_the_runtime_wires_one_executor_and_proxy_into_the_reconciler(
    monkeypatch: pytest.MonkeyPatch, executor: FakeExecutor
) -> None:
    monkeypatch.setattr(wiring, "ApiProxy", FakeProxy)
    kube: Any = object()
    caches: Any = object()
    runtime = wiring.build_runtime(
        config("--inject-owner-ref=false", "--proxy-stream-timeout=2m"),
        kube,
        on_child=print,
        caches=caches,
        extra_ansible_args="--check",
        watches=[watch()],
    )
    with Lifecycle(grace=5) as lifecycle:
        runtime.add_to(lifecycle)
        assert executor.extra_ansible_args == "--check"
        assert executor.watches == [watch()]  # the warm executor prepares the roles they run
        proxy = runtime.proxy
        assert isinstance(proxy, FakeProxy)
        assert (proxy.kube, proxy.inject, proxy.on_child, proxy.caches) == (kube, False, print, caches)
        assert proxy.max_stream_seconds == 120.0
        assert isinstance(runtime.reconciler, Reconciler)
        assert runtime.reconciler.executor is executor
        assert runtime.reconciler.proxy is proxy
        assert runtime.reconciler.kube is kube
        assert runtime.reconciler.recorder.kube is kube
        assert lifecycle.start_all()
        assert proxy.started and executor.started
        assert lifecycle.checks["executor"]() == (True, "ok")
    assert executor.closed and proxy.stopped
    assert not runtime.reconciler._kubeconfigs.exists()  # the runs' kubeconfig dir is gone too


def test_a_proxy_that_cannot_be_built_closes_the_executor(
    monkeypatch: pytest.MonkeyPatch, executor: FakeExecutor
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("no port")

    monkeypatch.setattr(wiring, "ApiProxy", broken)
    with pytest.raises(OSError, match="no port"):
        wiring.build_runtime(config(), object(), on_child=print)  # type: ignore[arg-type]
    assert executor.closed
