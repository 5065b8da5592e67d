"""Fixtures shared by the component tests that start twin processes (tests/component/twin, bench)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flagbot_lab.twin.install import NODE_SITE, install_into
from tests.support.twin_process import TwinFactory, tiny


@pytest.fixture(scope="session")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A node root with the twin installed; returns its site-packages directory.

    Scenarios are passed per process, so one read-only install serves every test.
    """
    root = tmp_path_factory.mktemp("twin-node")
    install_into(root, scenario=tiny())
    return root / NODE_SITE


@pytest.fixture
def twins(layout: Path, tmp_path: Path) -> Iterator[TwinFactory]:
    """Twin processes for one test; every one it starts is stopped afterwards."""
    factory = TwinFactory(layout, tmp_path)
    try:
        yield factory
    finally:
        factory.close()
