"""Fixtures of the store's component tests: a store with no schema, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.store import Store


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store with no schema at all (each test starts from nothing)."""
    if request.param == "sqlite":
        opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    else:
        opened = Store.open(request.getfixturevalue("postgres_url"))
        with opened.engine.begin() as connection:
            connection.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    yield opened
    opened.close()
