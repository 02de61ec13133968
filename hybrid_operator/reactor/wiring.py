"""What ``run`` and ``reconcile FILE`` both build: the executor, the runs' API proxy and the reconciler.

Called by ``orchestration.Operator`` (the watching operator) and ``oneshot`` (one reconcile of a file):
one place decides how a run reaches Ansible and the API server, so the rehearsal of a role runs exactly
as the operator would run it. ``kind_context`` is the same for a kind's settings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hybrid_operator import eventlog
from hybrid_operator.ansible.executors import Executor, build_executor
from hybrid_operator.kube.client import Kube, KubeObject, Resource
from hybrid_operator.kube.events import EventRecorder
from hybrid_operator.kube.owners import Child
from hybrid_operator.proxy.cachereads import Caches
from hybrid_operator.proxy.server import ApiProxy
from hybrid_operator.reactor.reconciling import KindContext, Reconciler
from hybrid_operator.settings.config import Config
from hybrid_operator.settings.watches import Watch


@dataclass
class Runtime:
    """The parts every reconcile goes through; ``close`` stops them (the executor's zygote, the proxy)."""

    executor: Executor
    proxy: ApiProxy
    reconciler: Reconciler

    def start(self) -> None:
        self.proxy.start()

    def close(self) -> None:
        self.executor.close()
        self.proxy.stop()
        self.reconciler.close()


def build_runtime(
    config: Config,
    kube: Kube,
    *,
    on_child: Callable[[Child], None],
    caches: Caches | None = None,
    extra_ansible_args: str = "",
) -> Runtime:
    """The executor ``config`` asks for, a proxy that reports children to ``on_child``, and the reconciler."""
    executor = build_executor(config, extra_ansible_args=extra_ansible_args)
    try:
        proxy = ApiProxy(
            kube,
            inject=config.inject_owner_ref,
            on_child=on_child,
            caches=caches,
            max_stream_seconds=config.proxy_stream_timeout,
        )
        return Runtime(executor, proxy, Reconciler(kube, executor, EventRecorder(kube), proxy))
    except BaseException:
        executor.close()  # its zygote and temporary dirs go with it
        raise


def kind_context(
    config: Config,
    watch: Watch,
    resource: Resource,
    lookup: Callable[[str, str], KubeObject | None],
    *,
    reconcile_period: float | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> KindContext:
    """One kind's settings for the reconciler: the watch's, else the operator's flags."""
    if reconcile_period is None:
        reconcile_period = config.reconcile_period if watch.reconcile_period is None else watch.reconcile_period
    return KindContext(
        watch=watch,
        resource=resource,
        lookup=lookup,
        reconcile_period=reconcile_period,
        verbosity=config.verbosity(watch.gvk),
        on_event=on_event,
        log_failed_output=eventlog.shows_failed_output(config.ansible_log_events),
        max_entries=config.max_object_entries,
        confine_runs=config.confine_runs,
    )
