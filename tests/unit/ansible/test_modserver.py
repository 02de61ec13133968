"""The module server refuses, with what to do, a socket path longer than a Unix socket may have (a long
``TMPDIR``), instead of starting a server that exits at once and saying only that it did."""

from __future__ import annotations

from pathlib import Path

import pytest

from hybrid_operator.ansible.modserver import SOCKET_PATH_MAX, ModuleServer
from hybrid_operator.errors import ConfigError


def test_a_socket_path_too_long_is_refused_naming_it_and_what_to_do(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * SOCKET_PATH_MAX)
    server = ModuleServer(deep)
    with pytest.raises(ConfigError, match=r"modules\.sock would be \d+ bytes long.*set TMPDIR to a shorter"):
        server.start()
    assert not deep.exists()  # nothing made, nothing started
    assert not server.alive()
