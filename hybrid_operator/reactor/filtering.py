"""The event filter: which watch events of a watched kind are worth a run, and how urgent they are.

Called by ``orchestration`` for every event its informers deliver. A new object, a new generation, a
deletion mark, a change of operator-sdk's annotations, a declared change of a kind without generations,
or (when the watch asks) any annotation change; status-only updates, including our own, never wake an
object. Objects that an earlier run already converged go behind new work.
"""

from __future__ import annotations

from hybrid_operator.kube.client import KubeObject
from hybrid_operator.kube.objects import generation_of, is_deleting, meta_of
from hybrid_operator.reactor.annotations import operator_annotations
from hybrid_operator.reactor.dependents import declared
from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, PRIORITY_RESYNC
from hybrid_operator.settings.watches import Watch


def wants_reconcile(watch: Watch, event_type: str, old: KubeObject | None, new: KubeObject) -> bool:
    """The event filter: which watch events (ADDED, MODIFIED, DELETED) are worth a run."""
    if event_type == "DELETED":
        return False
    if old is None or event_type == "ADDED":
        return True
    if generation_of(old) != generation_of(new):
        return True
    if generation_of(new) is None and declared(old) != declared(new):
        return True  # a kind without generations (a Secret's data): any declared change, as upstream reacts
    if is_deleting(new) and not is_deleting(old):
        return True
    old_meta, new_meta = meta_of(old), meta_of(new)
    if operator_annotations(old_meta) != operator_annotations(new_meta):
        return True  # a new reconcile period, verbosity or artifact count (or the fix of a bad one)
    # The annotations as sent, not annotations_of's strings: a change from none to {} still counts.
    return watch.watch_annotations_changes and old_meta.get("annotations") != new_meta.get("annotations")


def event_priority(event_type: str, obj: KubeObject) -> int:
    """Objects found at start that an earlier run already converged go after new work (operator-sdk#5246:
    with thousands of objects, a new one waited 25 minutes behind the start-up re-reconcile of all)."""
    if event_type != "ADDED":
        return PRIORITY_CHANGE
    status = obj.get("status")
    observed = status.get("observedGeneration") if isinstance(status, dict) else None
    generation = generation_of(obj)
    converged = observed is not None and observed == generation
    return PRIORITY_RESYNC if converged else PRIORITY_CHANGE
