from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.loop_actions import Probe, registered_actions


@pytest.fixture
def probe() -> Iterator[Probe]:
    with registered_actions() as registered:
        yield registered
