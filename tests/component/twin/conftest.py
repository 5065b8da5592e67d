"""Fixtures for the twin-process tests: a node layout and the processes started from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.twin.install import NODE_SITE, install_into
from tests.support.twin_process import Twin, TwinFactory, tiny


@pytest.fixture(scope="session")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A node root with the twin installed; returns its site-packages directory."""
    root = tmp_path_factory.mktemp("twin-node")
    install_into(root, scenario=tiny())
    return root / NODE_SITE


@pytest.fixture
def twins(layout: Path, tmp_path: Path) -> Iterator[TwinFactory]:
    factory = TwinFactory(layout, tmp_path)
    try:
        yield factory
    finally:
        factory.close()


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
