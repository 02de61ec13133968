"""A restart that costs little: objects already converged are not run again at start-up (opt-in per watch).

A watch with ``skipConvergedAtStart: true`` records, with each successful run, what the run stood on, in
the object's status (``status.reconciledWith``, written with the run's status patch):

- ``generation``: the ``metadata.generation`` the run reconciled;
- ``content``: a digest of what runs run (``content_digest``): the operator's own code and version, the
  ansible-core version, the watch's settings and every file of the role's or playbook's directory tree
  (a role's: the directory holding it, so the roles it includes count too) and of the roles paths;
- ``children``: a digest of the owner's children as the run left them (``DependentWatches.children_digest``:
  each child's kind, name, uid, its generation, or for a kind without one the digest of what it declares,
  and its deletion mark), and ``kinds``, the child kinds its runs touched.

A failed run removes the record. At start-up (or whenever the watch lists an object it had not seen), an
object whose record names its current generation and the current content, that is not being deleted and
whose last run did not fail, is held back from the queue; once the caches of the recorded child kinds have
listed, its children's digest is computed again. Equal: the last run stands, and the object only gets its
periodic resync at its phase (``queueing.resync_delay``). Different: a child was created, deleted or
changed while the operator was down (drift), and the object runs, as a change. Caches that do not list
within ``CHECK_WITHIN`` seconds: it runs. Anything this module cannot tell (a malformed record, an
unreadable role file) means a run: skipping is an optimisation and never the reason a run is lost.

Why the status: only the operator writes it. With the status subresource, whoever may update a custom
resource (its spec, labels, annotations) cannot write its status without a grant on ``<plural>/status``,
so a tenant cannot forge a record to skip a run they should get; and every change they can make (the spec,
deletion) moves the generation or the deletion mark, which the record is checked against. A kind without
a status subresource has its status written by updates of the object, so there the option stays off (said
once in the log). Called by ``kinds`` (each object a watch lists) and ``reconciling`` (each run's record).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from hybrid_operator import metrics
from hybrid_operator.errors import InvalidObject
from hybrid_operator.kube.client import KubeObject, Resource
from hybrid_operator.kube.objects import GVK, generation_of, is_deleting, meta_of
from hybrid_operator.reactor import status as status_mod
from hybrid_operator.reactor.annotations import run_settings
from hybrid_operator.reactor.dependents import DependentWatches
from hybrid_operator.reactor.queueing import PRIORITY_CHANGE, PRIORITY_RESYNC, Key, WorkQueue, resync_delay
from hybrid_operator.settings.watches import Watch

log = logging.getLogger(__name__)

RECORD = "reconciledWith"  # the status key
CHECK_WITHIN = 120.0  # seconds the child kinds' caches get to list before held-back objects run anyway
MAX_KINDS = 64  # child kinds a record may name
MAX_FILES = 20_000  # files hashed per directory tree before the option switches itself off for the watch
MAX_BYTES = 256 << 20
_SKIPPED_DIRS = {".git", "__pycache__", ".tox", ".venv", "node_modules"}
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Record:
    """What ``status.reconciledWith`` says, parsed with bounds (it comes from the object)."""

    generation: int
    content: str
    children: str
    kinds: tuple[str, ...]

    def as_status(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "content": self.content,
            "children": self.children,
            "kinds": list(self.kinds),
        }


def parse_record(status: Any) -> Record | None:
    """The record in a status, or None when there is none or it is not exactly what we write."""
    raw = status.get(RECORD) if isinstance(status, Mapping) else None
    if not isinstance(raw, Mapping) or set(raw) != {"generation", "content", "children", "kinds"}:
        return None
    generation, content, children, kinds = raw["generation"], raw["content"], raw["children"], raw["kinds"]
    if isinstance(generation, bool) or not isinstance(generation, int) or not 0 < generation < 2**63:
        return None
    if not (_is_digest(content) and _is_digest(children)):
        return None
    if not isinstance(kinds, list) or len(kinds) > MAX_KINDS:
        return None
    if not all(isinstance(k, str) and 0 < len(k) <= 320 and _gvk_of(k) is not None for k in kinds):
        return None
    return Record(generation, content, children, tuple(kinds))


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 32 and set(value) <= _HEX


def _gvk_of(text: str) -> GVK | None:
    """``str(GVK)`` read back: ``Kind.version`` or ``Kind.version.group``."""
    kind, _, rest = text.partition(".")
    version, _, group = rest.partition(".")
    if not kind or not version or not kind.isalnum() or not version.isalnum():
        return None
    return GVK(group, version, kind)


# -- what runs run ----------------------------------------------------------------------------------------


def content_digest(watch: Watch, roles_paths: Iterable[Path]) -> str | None:
    """A digest of everything a run of ``watch`` runs, or None when it cannot be pinned (a collection's
    role, a tree too large to read): then the watch never skips."""
    target = watch.target
    if target.playbook is not None:
        trees = [target.playbook.parent]
    elif target.role is not None and Path(target.role).is_absolute():
        trees = [Path(target.role).parent]
    else:
        return None  # a collection's role: its content is wherever Ansible finds the collection at run time
    hasher = hashlib.blake2b(digest_size=16)
    hasher.update(json.dumps(_operator_identity(), sort_keys=True).encode())
    hasher.update(json.dumps(asdict(watch), sort_keys=True, default=str).encode())
    for tree in [*trees, *roles_paths]:
        if not _hash_tree(hasher, tree):
            return None
    return hasher.hexdigest()


_IDENTITY: dict[str, str] = {}


def _operator_identity() -> dict[str, str]:
    """The operator's version, its own code (a build with the same version number but other code counts as
    another operator) and ansible-core's version."""
    if not _IDENTITY:
        package = Path(__file__).resolve().parents[1]
        code = hashlib.blake2b(digest_size=16)
        for path in sorted(package.rglob("*.py")):
            code.update(str(path.relative_to(package)).encode())
            code.update(path.read_bytes())
        _IDENTITY.update(
            operator=_version("hybrid-operator"), code=code.hexdigest(), ansible_core=_version("ansible-core")
        )
    return _IDENTITY


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def _hash_tree(hasher: Any, top: Path) -> bool:
    """Every file under ``top`` (path and content, in a stable order) into ``hasher``; False past the bounds
    or on a file that cannot be read."""
    files = size = 0
    hasher.update(b"\0tree\0" + str(top).encode("utf-8", "surrogateescape"))
    if not top.is_dir():
        return True  # a roles path that does not exist runs nothing
    for root, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(names):
            if name.endswith((".pyc", ".retry")):
                continue
            path = Path(root) / name
            files += 1
            try:
                data = path.read_bytes()
            except OSError:
                if path.is_symlink():
                    hasher.update(b"\0dangling\0" + str(path).encode("utf-8", "surrogateescape"))
                    continue
                return False
            size += len(data)
            if files > MAX_FILES or size > MAX_BYTES:
                return False
            hasher.update(b"\0file\0" + str(path.relative_to(top)).encode("utf-8", "surrogateescape") + b"\0")
            hasher.update(hashlib.blake2b(data, digest_size=16).digest())
    return True


# -- the start-up check -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Held:
    """An object held back from the queue until its children can be checked."""

    record: Record
    period: float  # its reconcile period (0: none)
    since: float  # monotonic time it was held


class Resumer:
    """Records what each successful run stood on, and holds back converged objects at start-up."""

    def __init__(
        self,
        watches: list[Watch],
        roles_paths: Iterable[Path],
        dependents: DependentWatches,
        queue: WorkQueue,
        lookup: Callable[[Key], KubeObject | None],
        *,
        check_within: float = CHECK_WITHIN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dependents = dependents
        self.queue = queue
        self.lookup = lookup  # the current object of a key, from its kind's cache
        self.check_within = check_within
        self._clock = clock
        self._content: dict[str, str] = {}
        roles = tuple(roles_paths)
        for watch in watches:
            if not watch.skip_converged_at_start:
                continue
            content = content_digest(watch, roles)
            if content is None:
                log.warning(
                    "skipConvergedAtStart is off for %s: what its runs run cannot be pinned (a collection's "
                    "role, or more than %d files or %d MiB); every object runs at start-up",
                    watch.gvk,
                    MAX_FILES,
                    MAX_BYTES >> 20,
                )
                continue
            self._content[str(watch.gvk)] = content
        self._held: dict[Key, _Held] = {}
        self._cond = threading.Condition()
        self._off_said: set[str] = set()
        self._counts: dict[str, dict[str, int]] = {}

    def enabled(self, watch: Watch, resource: Resource) -> bool:
        """Whether ``watch`` records and skips: it asked, its content is pinned and its kind's status is a
        subresource only the operator writes."""
        gvk = str(watch.gvk)
        if gvk not in self._content:
            return False
        if not resource.status_subresource:
            if gvk not in self._off_said:
                self._off_said.add(gvk)
                log.warning(
                    "skipConvergedAtStart is off for %s: its CRD has no status subresource, so whoever may "
                    "update an object could also write the record that skips its run",
                    gvk,
                )
            return False
        return True

    # -- each run -------------------------------------------------------------------------------------------

    def record(self, watch: Watch, key: Key, reconciled: KubeObject, succeeded: bool) -> dict[str, Any] | None:
        """The ``status.reconciledWith`` a run of ``reconciled`` leaves (None: none, the object runs at the next
        start): a success whose children's caches have all listed records what it stood on."""
        generation = generation_of(reconciled)
        content = self._content.get(str(watch.gvk))
        if not succeeded or generation is None or content is None or is_deleting(reconciled):
            return None
        kinds = self.dependents.kinds_of(watch.gvk)
        if len(kinds) > MAX_KINDS or not self.dependents.synced(kinds):
            return None
        return Record(generation, content, self.dependents.children_digest(key, kinds), tuple(kinds)).as_status()

    # -- start-up ------------------------------------------------------------------------------------------

    def hold(self, watch: Watch, key: Key, obj: KubeObject, default_period: float) -> bool:
        """An object a watch listed: True if it is held back (its record says converged), to be run or skipped
        once its children are checked; False if it goes to the queue as usual."""
        content = self._content.get(str(watch.gvk))
        status = obj.get("status")
        record = parse_record(status)
        if content is None or record is None or record.content != content:
            return False
        observed = status.get("observedGeneration") if isinstance(status, Mapping) else None
        if record.generation != generation_of(obj) or (observed is not None and observed != record.generation):
            return False
        if is_deleting(obj) or status_mod.last_failed(obj):
            return False
        try:
            period = _period(obj, default_period)
        except InvalidObject:
            return False  # the run reports the bad annotation
        for kind in record.kinds:
            gvk = _gvk_of(kind)
            if gvk is not None:
                self.dependents.ensure(watch.gvk, gvk)
        with self._cond:
            self._held[key] = _Held(record, period, self._clock())
            self._cond.notify_all()
        return True

    def run(self, stop: threading.Event) -> None:
        """Check held-back objects as their children's caches list (the orchestration's thread)."""
        while not stop.is_set():
            with self._cond:
                if not self._held:
                    self._cond.wait(1.0)
                    continue
                held = dict(self._held)
            decided = [key for key, entry in held.items() if self._decide(key, entry)]
            with self._cond:
                for key in decided:
                    self._held.pop(key, None)
                remaining = len(self._held)
            if not remaining:
                self._say_counts()
            stop.wait(0.2 if remaining else 0)

    def held(self) -> int:
        with self._cond:
            return len(self._held)

    def _decide(self, key: Key, entry: _Held) -> bool:
        """Skip or run one held object if its children can be told now; True once decided."""
        kinds = list(entry.record.kinds)
        if not self.dependents.synced(kinds):
            if self._clock() - entry.since < self.check_within:
                return False
            self._count(key, "unverified")
            self.queue.add(key, priority=PRIORITY_CHANGE)
            return True
        obj = self.lookup(key)
        if obj is None:
            return True  # gone meanwhile
        if parse_record(obj.get("status")) != entry.record or generation_of(obj) != entry.record.generation:
            return True  # changed meanwhile: its own event queued it
        if self.dependents.children_digest(key, kinds) != entry.record.children:
            self._count(key, "drifted")
            log.info(
                "a child of %s changed while the operator was down: running it",
                key,
                extra={"fields": {"kind": key.gvk, "namespace": key.namespace, "name": key.name}},
            )
            self.queue.add(key, priority=PRIORITY_CHANGE)
            return True
        self._count(key, "skipped")
        if entry.period > 0:
            self.queue.add(key, delay=resync_delay(key, entry.period, time.time()), priority=PRIORITY_RESYNC)
        return True

    def _count(self, key: Key, result: str) -> None:
        metrics.STARTUP_CHECKS.labels(key.gvk, result).inc()
        counts = self._counts.setdefault(key.gvk, {})
        counts[result] = counts.get(result, 0) + 1

    def _say_counts(self) -> None:
        for gvk, counts in self._counts.items():
            log.info(
                "start-up check of %s: %d converged objects skipped, %d drifted and %d unverified run",
                gvk,
                counts.get("skipped", 0),
                counts.get("drifted", 0),
                counts.get("unverified", 0),
                extra={"fields": {"kind": gvk, **counts}},
            )
        self._counts.clear()


def _period(obj: KubeObject, default: float) -> float:
    """The object's reconcile period (its annotation's, else the kind's); ``InvalidObject`` for any bad
    operator-sdk annotation, which a run must report."""
    return run_settings(meta_of(obj), period=default, verbosity=0, max_artifacts=0).reconcile_period
