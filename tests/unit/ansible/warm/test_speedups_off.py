"""On an ansible-core the speed-ups were not written for (2.18), each turns itself off and says why, and
a run is what Ansible alone makes of it (the equivalence tests of the matrix leg check the runs)."""

from __future__ import annotations

import pytest

from hybrid_operator.ansible import compat
from tests.unit.ansible.warm.speedups import OFF_HERE

pytestmark = pytest.mark.skipif(not OFF_HERE, reason="the speed-ups are on with this ansible-core")


def test_every_speed_up_reports_why_it_is_off() -> None:
    assert compat.template_cache_problems()
    assert compat.loader_hook_problems()
    assert compat.tmpdir_hook_problems()
    assert compat.datatag_problems()
