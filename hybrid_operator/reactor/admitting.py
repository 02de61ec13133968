"""An object's checks before a run: what a custom resource's author controls is bounded here.

Called by ``reconciling`` first thing for every object it is about to run. Whoever may create a custom
resource is usually far less trusted than the operator, so nothing of the object reaches Ansible before it
passed: a size (``--max-object-entries``: an object over it is kept only as a stub by the informer and
refused here), a nesting depth Ansible and the extra-vars file can take, no mapping key anywhere in the
object (spec, status, metadata) that Ansible's decoders give meaning to (``__ansible_unsafe``...: see
``ansible.extravars``), a spec that is a mapping whose keys do not name one of Ansible's or the operator's
own variables, no two keys of one mapping that snake_case into the same name (the unchecked twin of a
schema-checked field would override it), and operator-sdk's annotations within bounds. What fails raises
``InvalidObject`` with a reason and a message naming every offending field as the user wrote it; the
reconciler puts that on the object (Failure condition, Warning Event) and does not run it until it
changes. And no object runs at all while the installed Ansible failed the start-up check that it reads the
extra vars as data (``ansible.reserved``): reason ``UnsafeAnsible``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hybrid_operator.ansible import extravars, naming
from hybrid_operator.ansible.reserved import Reservations
from hybrid_operator.errors import InvalidObject, TemporaryError
from hybrid_operator.kube.objects import containers, count_entries, meta_of, oversize_of, oversize_stub
from hybrid_operator.reactor.annotations import RunSettings, run_settings

MAX_DEPTH = 100  # nesting levels of the whole object; real resources stay far below 30
DEFAULT_MAX_ENTRIES = 10_000  # --max-object-entries: Kiali's CR with every option set has a few hundred
REASON_SPEC = "InvalidSpec"
REASON_OBJECT = "InvalidObject"
REASON_ANSIBLE = "UnsafeAnsible"
_LISTED = 10  # offending keys named in a message; the rest are counted
_KEY_CHARS = 64  # characters of each key shown
_PATH_CHARS = 200  # characters of each path shown


def admit(
    obj: Mapping[str, Any],
    *,
    group: str,
    kind: str,
    snake_case: bool,
    ansible: Callable[[], Reservations],
    defaults: RunSettings,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> RunSettings:
    """The object's run settings if it may run; ``InvalidObject`` saying why not otherwise.

    ``TemporaryError`` when the start-up check of the installed Ansible could not run yet (retried).
    """
    reservations = ansible()
    if reservations.loading_problem:
        problem = reservations.loading_problem
        message = f"refusing to run: the installed Ansible does not read the extra vars as data ({problem})"
        if not reservations.final:
            raise TemporaryError(message)
        raise InvalidObject(REASON_ANSIBLE, message)
    depth = nesting_depth(obj, MAX_DEPTH)
    if depth > MAX_DEPTH:
        raise InvalidObject(
            REASON_OBJECT, f"The object is nested more than {MAX_DEPTH} levels deep; refusing to run it"
        )
    _check_entries(obj, max_entries)
    keys = extravars.reserved_key_paths(obj, reservations.keys, limit=_LISTED + 1)
    if keys:
        in_spec = all(path.startswith("spec.") for path in keys)
        raise InvalidObject(REASON_SPEC if in_spec else REASON_OBJECT, key_message(keys))
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, Mapping):
        raise InvalidObject(REASON_SPEC, f"spec must be an object, not {type(spec).__name__}")
    refused = naming.refused_spec_names(
        spec or {}, group=group, kind=kind, snake_case=snake_case, reserved=reservations.names
    )
    if refused:
        raise InvalidObject(REASON_SPEC, spec_message(refused))
    if snake_case:
        twins = naming.snake_twins(spec or {}, limit=_LISTED + 1)
        if twins:
            raise InvalidObject(REASON_SPEC, twins_message(twins))
    return run_settings(
        meta_of(obj),
        period=defaults.reconcile_period,
        verbosity=defaults.verbosity,
        max_artifacts=defaults.max_artifacts,
    )


def _check_entries(obj: Mapping[str, Any], limit: int) -> None:
    """Refuse an object with more than ``limit`` entries: the informer kept only a stub of one (it says how
    large it was), and an object that came another way (``reconcile FILE``, our own write) is counted here."""
    size = oversize_of(obj)
    if size is None:
        entries = count_entries(obj, limit)
        if entries <= limit:
            return
        size = oversize_of(oversize_stub(obj, count_entries(obj, 1 << 62), limit))
        assert size is not None
    where = "its spec" if size.spec > size.limit else "the whole object (metadata, spec and status)"
    raise InvalidObject(
        REASON_SPEC if size.spec > size.limit else REASON_OBJECT,
        f"The object holds {size.entries} entries (mapping items and list elements at any depth; {size.spec} in "
        f"its spec), more than the {size.limit} the operator takes (--max-object-entries); refusing to run it "
        f"until {where} is smaller",
    )


def twins_message(twins: list[tuple[str, list[str]]]) -> str:
    shown = "; ".join(f"{path}: {' and '.join(repr(k[:_KEY_CHARS]) for k in keys)}" for path, keys in twins[:_LISTED])
    more = " and more" if len(twins) > _LISTED else ""
    return (
        f"spec keys that become the same variable name once snake_cased: {shown}{more}; the role would see only "
        "one of them (the last written, whichever the schema checked): keep one spelling"
    )


def spec_message(keys: list[str]) -> str:
    shown = ", ".join(repr(k[:_KEY_CHARS] + ("..." if len(k) > _KEY_CHARS else "")) for k in keys[:_LISTED])
    more = f" and {len(keys) - _LISTED} more" if len(keys) > _LISTED else ""
    return (
        f"spec keys {shown}{more} name variables reserved for Ansible or the operator (ansible_*, _*, "
        "Ansible's magic variables and template names, or not a valid variable name); the operator author can "
        "pass such values through watches.yaml vars"
    )


def key_message(paths: list[str]) -> str:
    shown = ", ".join(p[:_PATH_CHARS] + ("..." if len(p) > _PATH_CHARS else "") for p in paths[:_LISTED])
    more = " and more" if len(paths) > _LISTED else ""
    return (
        f"keys that Ansible reads as instructions, not data, are not allowed anywhere in the object: {shown}{more} "
        f"(no mapping key may start with {extravars.RESERVED_KEY_PREFIX!r})"
    )


def nesting_depth(value: Any, limit: int) -> int:
    """How deep ``value`` nests (a scalar is 0), counting at most to ``limit + 1``; never recurses."""
    deepest = 0
    for _children, depth in containers(value):
        deepest = max(deepest, depth)
        if deepest > limit:
            break
    return deepest
