"""Deep copies that share Ansible's immutable tagged values (``warm.zygote``): ``copy.deepcopy`` of a tagged
``str``, ``bytes``, ``int``, ``float``, ``date``, ``time`` or ``datetime`` returns the value itself, as it does for
their untagged types. Same in 2.19-2.21; ``datatag_problems`` checks the shape before ``share_tagged_scalars``.

Why: ansible-core 2.19 tags every string it loads (where it came from, whether it may be templated), and a
tagged ``str`` is a subclass, which ``copy.deepcopy`` rebuilds through ``__reduce_ex__`` with a deep copy of its
tags, where a plain ``str`` is returned as it is. Roles pay that often: every ``lookup('template')`` deep-copies
all of the task's variables, every ``include_tasks`` its file's parsed tasks. The value and its tags never change
after the value is made (each of these classes sets its tags once, in its factory, and a new tag makes a new
value), so a copy that shares them is the same as a rebuilt one for everything but ``is``. Tagged containers
(dict, list, set, tuple) are still copied, item by item, as before.
"""

from __future__ import annotations

import datetime
from typing import Any

_SCALARS = {
    "_AnsibleTaggedStr": str,
    "_AnsibleTaggedBytes": bytes,
    "_AnsibleTaggedInt": int,
    "_AnsibleTaggedFloat": float,
    "_AnsibleTaggedDate": datetime.date,
    "_AnsibleTaggedTime": datetime.time,
    "_AnsibleTaggedDateTime": datetime.datetime,
}
_installed: list[type] = []


def _shared(value: Any, memo: Any = None) -> Any:
    return value


def datatag_problems() -> list[str]:
    """Why ``share_tagged_scalars`` cannot be installed on this ansible-core (empty: it can)."""
    try:
        from ansible.module_utils._internal import _datatag

        problems = []
        for name, base in _SCALARS.items():
            cls = getattr(_datatag, name, None)
            if (
                not isinstance(cls, type)
                or not issubclass(cls, base)
                or not issubclass(cls, _datatag.AnsibleTaggedObject)
            ):
                problems.append(f"_datatag.{name}: not a tagged {base.__name__}")
            elif vars(cls).get("__deepcopy__", _shared) is not _shared:
                problems.append(f"_datatag.{name}: has a __deepcopy__ of its own")
        if "_ansible_tags_mapping" not in getattr(_datatag, "_ANSIBLE_TAGGED_OBJECT_SLOTS", ()):
            problems.append("_datatag._ANSIBLE_TAGGED_OBJECT_SLOTS: no _ansible_tags_mapping")
    except Exception as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    return problems


def share_tagged_scalars() -> None:
    """Make deep copies share tagged scalars (see the module docstring). Check ``datatag_problems`` first."""
    from ansible.module_utils._internal import _datatag

    for name in _SCALARS:
        cls = getattr(_datatag, name)
        cls.__deepcopy__ = _shared
        _installed.append(cls)
