"""Which executor runs the roles: the warm one when this ansible-core supports it, else ansible-runner.

Called by ``orchestration.run_operator`` (the operator's runs) and ``oneshot`` (``reconcile FILE``, which
adds ``--check`` for a rehearsal). Kept apart from the wiring so that both share one choice.
"""

from __future__ import annotations

import logging

from hybrid_operator.ansible.running import Executor, ExecutorSettings, RunnerExecutor
from hybrid_operator.settings.config import Config

log = logging.getLogger(__name__)

__all__ = ["Executor", "build_executor"]


def build_executor(config: Config, *, extra_ansible_args: str = "") -> Executor:
    """The executor ``run`` uses (also ``reconcile FILE``'s, which adds ``--check`` for a rehearsal)."""
    runs = config.runs
    settings = ExecutorSettings(
        artifacts_root=runs.artifacts_dir,
        artifacts_max_bytes=runs.max_artifacts_bytes,
        timeout=runs.timeout,
        ansible_args=" ".join(a for a in (runs.ansible_args, extra_ansible_args) if a),
        # Playbooks name roles by name: find them beside watches.yaml, as operator-sdk's image does.
        roles_paths=(*runs.roles_paths, config.watching.watches_file.resolve().parent / "roles"),
        collections_paths=runs.collections_paths,
        module_server=runs.module_server,
        inventory=runs.inventory,
        run_memory=runs.memory,
    )
    return _executor(runs.executor, settings)


def _executor(executor_kind: str, settings: ExecutorSettings) -> Executor:
    """The executor ``--executor`` names: ``warm`` (when this ansible-core is one it supports) or ``runner``."""
    if executor_kind == "warm":
        from hybrid_operator.ansible.compat import UnsupportedAnsible, check_version
        from hybrid_operator.ansible.warm.executor import WarmExecutor  # type: ignore[import-not-found,unused-ignore]

        try:
            check_version()
        except UnsupportedAnsible as exc:
            log.warning("%s; using the runner executor instead", exc)
            return RunnerExecutor(settings)
        executor: Executor = WarmExecutor(settings)
        return executor
    return RunnerExecutor(settings)
