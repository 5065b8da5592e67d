"""Fixtures for the twin-process tests: a node layout and the processes started from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.twin_process import Twin, TwinFactory


@pytest.fixture(scope="module")
def served(layout: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    """One ready twin with metrics on and room for only two running requests."""
    factory = TwinFactory(layout, tmp_path_factory.mktemp("served"))
    try:
        twin = factory.start("--enable-metrics", "--max-running-requests", "2")
        twin.wait_ready()
        yield twin
    finally:
        factory.close()
