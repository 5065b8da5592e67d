"""Tier markers come from the directory a test lives in, so a test cannot forget its tier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from bot.store import Store

TIERS = ("unit", "component", "integration")
FIXTURES = Path(__file__).parent / "fixtures"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        try:
            parts = Path(str(item.fspath)).relative_to(root).parts
        except ValueError:
            continue
        if parts and parts[0] in TIERS:
            item.add_marker(getattr(pytest.mark, parts[0]))


@pytest.fixture
def fixtures_dir() -> Path:
    """The corpus copies and other recorded real output the tests read."""
    return FIXTURES


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL for the whole session (see tests/support/postgres.py)."""
    from tests.support.postgres import running_postgres, unavailable_reason

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with running_postgres() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store with no schema at all (each test starts from nothing), on SQLite and PostgreSQL."""
    from sqlalchemy import text

    from bot.store import Store

    if request.param == "sqlite":
        opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    else:
        opened = Store.open(request.getfixturevalue("postgres_url"))
        with opened.engine.begin() as connection:
            connection.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    yield opened
    opened.close()
