"""Fixtures the proxy's unit tests share: a fake API server recording what reaches it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.proxy.test_server import Upstream


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    up = Upstream()
    yield up
    up.server.shutdown()
