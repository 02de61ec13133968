"""The reconciler's per-run kubeconfigs (they hold the API proxy's secret) live in a private dir of its
own, removed by ``close()`` when the operator stops: nothing of it is left in the temp dir."""

from __future__ import annotations

import os
import stat
from typing import Any

from hybrid_operator.reactor.reconciling import Reconciler


def test_kubeconfig_dir_is_private_and_removed_by_close() -> None:
    none: Any = None
    reconciler = Reconciler(none, none, none)
    scratch = reconciler._kubeconfigs
    assert scratch.name.startswith(f"hybrid-operator-runs-{os.getpid()}-")
    assert stat.S_IMODE(os.lstat(scratch).st_mode) == 0o700
    (scratch / "abc.kubeconfig").write_text("token")
    reconciler.close()
    assert not scratch.exists()
