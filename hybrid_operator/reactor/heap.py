"""Giving freed memory back to the system once the operator goes idle after a burst of work.

Called by ``workers`` when no run has ended for ``Workers.trim_after`` seconds after some work. A burst of
runs (thousands of objects at start-up, a flood of changes) decodes and frees many objects; CPython
hands small blocks back to its allocator, but glibc keeps the freed pages of its heaps (one per thread)
for reuse, so the resident size stays at the burst's peak for as long as the process lives. glibc's
``malloc_trim(0)`` returns every free page of every heap. An optimisation: where there is no glibc
(musl, another libc) it is unavailable and nothing happens; it never raises.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]  # type: ignore[attr-defined]
    trim.restype = ctypes.c_int  # type: ignore[attr-defined]
    return trim


_TRIM = _malloc_trim()


def trim() -> bool:
    """Return the free pages of the C heaps to the system; False where the C library cannot."""
    if _TRIM is None:
        return False
    try:
        _TRIM(0)
    except OSError:
        return False
    return True
