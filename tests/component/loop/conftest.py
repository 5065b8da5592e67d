"""Fixtures of the loop's component tests: the test actions, and the store on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from bot.store import AsyncStore, Store
from tests.support.loop_actions import Probe, registered_actions


@pytest.fixture
def probe() -> Iterator[Probe]:
    with registered_actions() as registered:
        yield registered


@pytest.fixture
def sync_store(empty_store: Store) -> Store:
    """A migrated store, once on SQLite in tmp_path and once on the tests' real PostgreSQL."""
    empty_store.upgrade()
    return empty_store


@pytest.fixture
async def store(sync_store: Store) -> AsyncIterator[AsyncStore]:
    astore = AsyncStore(sync_store)
    yield astore
    astore._executor.shutdown(wait=True)
