"""The store the component tests of `bot.store` share: upgraded, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store import Store
from tests.support.schedule import migrated_store


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An upgraded store, once per backend (PostgreSQL emptied first)."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    opened = migrated_store(request.param, tmp_path, url)
    yield opened
    opened.close()
