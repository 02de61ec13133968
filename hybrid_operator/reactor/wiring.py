"""What ``run`` and ``reconcile FILE`` both build: the executor, the runs' API proxy and the reconciler.

Called by ``orchestration.Operator`` (the watching operator) and ``oneshot`` (one reconcile of a file), which
hand the parts to their lifecycle (``Runtime.add_to``): one place decides how a run reaches Ansible and the
API server, so the rehearsal of a role runs exactly as the operator would run it. ``kind_context`` is the same
for a kind's settings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hybrid_operator import eventlog
from hybrid_operator.ansible.executors import Executor, build_executor
from hybrid_operator.kube.client import Kube, KubeObject, Resource
from hybrid_operator.kube.events import EventRecorder
from hybrid_operator.kube.owners import Child
from hybrid_operator.lifecycle import Closing, Group, Lifecycle
from hybrid_operator.proxy.cachereads import Caches
from hybrid_operator.proxy.server import ApiProxy
from hybrid_operator.reactor.reconciling import KindContext, Reconciler
from hybrid_operator.settings.config import Config
from hybrid_operator.settings.watches import Watch


@dataclass
class Runtime:
    """The parts every reconcile goes through; ``add_to`` hands them to the lifecycle that runs them."""

    executor: Executor
    proxy: ApiProxy
    reconciler: Reconciler

    def add_to(self, lifecycle: Lifecycle) -> None:
        """The proxy with the servers; the executor and the runs' kubeconfigs with what every replica keeps."""
        lifecycle.add(Group.SERVERS, "API proxy for runs", self.proxy)
        lifecycle.add(Group.OTHERS, "executor", self.executor, check="executor")
        lifecycle.add(Group.OTHERS, "runs' kubeconfigs", Closing(self.reconciler.close))


def build_runtime(
    config: Config,
    kube: Kube,
    *,
    on_child: Callable[[Child], None],
    caches: Caches | None = None,
    extra_ansible_args: str = "",
    watches: Sequence[Watch] = (),
) -> Runtime:
    """The executor ``config`` asks for (preparing the roles of ``watches``), a proxy that reports children to
    ``on_child``, and the reconciler."""
    executor = build_executor(config, extra_ansible_args=extra_ansible_args, watches=watches)
    try:
        proxy = ApiProxy(
            kube,
            inject=config.proxy.inject_owner_ref,
            on_child=on_child,
            caches=caches,
            max_stream_seconds=config.proxy.stream_timeout,
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
        reconcile_period = (
            config.watching.reconcile_period if watch.reconcile_period is None else watch.reconcile_period
        )
    return KindContext(
        watch=watch,
        resource=resource,
        lookup=lookup,
        reconcile_period=reconcile_period,
        verbosity=config.runs.verbosity_of(watch.gvk),
        on_event=on_event,
        log_failed_output=eventlog.shows_failed_output(config.logging.run_events),
        max_entries=config.watching.max_object_entries,
        confine_runs=config.proxy.confine_runs,
    )
