"""Which ansible-core minors the warm path's speed-ups (template cache, parsed files, local temp dirs,
shared copies) are written for: on older ones each shape check reports why and the speed-up stays off."""

from __future__ import annotations

from hybrid_operator.ansible.compat.versions import ansible_version

FIRST = (2, 19)  # 2.18's templating, loader and action plugins have other shapes (no ansible._internal)
OFF_HERE = ansible_version()[:2] < FIRST
