"""The scheduler's unit tests share one migrated SQLite store per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store import AsyncStore
from tests.support.schedule import migrated_store


@pytest.fixture
async def astore(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    store = AsyncStore(migrated_store("sqlite", tmp_path))
    yield store
    await store.aclose()
