"""Which executor runs the roles: the warm one when this ansible-core supports it, else ansible-runner.

Called by ``orchestration.run_operator`` (the operator's runs) and ``oneshot`` (``reconcile FILE``, which
adds ``--check`` for a rehearsal). Kept apart from the wiring so that both share one choice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from hybrid_operator.ansible.running import Executor, ExecutorSettings, RunnerExecutor
from hybrid_operator.settings.config import Config
from hybrid_operator.settings.watches import Target, Watch

log = logging.getLogger(__name__)

__all__ = ["Executor", "build_executor"]


def build_executor(config: Config, *, extra_ansible_args: str = "", watches: Sequence[Watch] = ()) -> Executor:
    """The executor ``run`` uses (also ``reconcile FILE``'s, which adds ``--check`` for a rehearsal); the warm
    one prepares the roles ``watches`` run (``prepared_dirs``) besides those on the roles path."""
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
        prepared_dirs=prepared_dirs(watches),
        prepared_playbooks=prepared_playbooks(watches),
    )
    return _executor(runs.executor, settings)


def _targets(watches: Sequence[Watch]) -> list[Target]:
    """What ``watches`` run: each watch's role or playbook, and its finalizer's."""
    targets: list[Target] = []
    for watch in watches:
        targets.append(watch.target)
        if watch.finalizer is not None and watch.finalizer.target is not None:
            targets.append(watch.finalizer.target)
    return targets


def prepared_playbooks(watches: Sequence[Watch]) -> tuple[Path, ...]:
    """The playbooks ``watches`` run (finalizers' included), which the warm executor's zygote loads ahead for
    every run (``warm.plays``; the wrappers of roles it finds itself). In order, each once."""
    found = {t.playbook: None for t in _targets(watches) if t.playbook is not None}
    return tuple(found)


def prepared_dirs(watches: Sequence[Watch]) -> tuple[Path, ...]:
    """The directories whose roles the warm executor's zygote prepares for every run besides the roles path
    (``warm.project``): each role watches.yaml names by its path, and the ``roles/`` beside each playbook
    (where Ansible looks for the roles a playbook names), finalizers' included. A collection's role is found
    by Ansible at run time and not prepared. In order, each once."""
    found: dict[Path, None] = {}
    for target in _targets(watches):
        if target.playbook is not None:
            found.setdefault(target.playbook.parent / "roles", None)
        elif target.role is not None and Path(target.role).is_absolute():
            found.setdefault(Path(target.role), None)
    return tuple(found)


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
