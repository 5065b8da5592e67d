"""Fixtures of the loop's component tests: the test actions, and the store on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.store import AsyncStore, Store
from tests.support.loop_actions import Probe, registered_actions


@pytest.fixture
def probe() -> Iterator[Probe]:
    with registered_actions() as registered:
        yield registered


@pytest.fixture(params=["sqlite", "postgresql"])
def sync_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A migrated store, once on SQLite in tmp_path and once on the tests' real PostgreSQL."""
    if request.param == "sqlite":
        opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    else:
        opened = Store.open(request.getfixturevalue("postgres_url"))
        with opened.engine.begin() as connection:
            connection.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    opened.upgrade()
    yield opened
    opened.close()


@pytest.fixture
async def store(sync_store: Store) -> AsyncIterator[AsyncStore]:
    astore = AsyncStore(sync_store)
    yield astore
    astore._executor.shutdown(wait=True)
