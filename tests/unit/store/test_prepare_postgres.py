"""On PostgreSQL `Store.prepare` only checks: a schema behind is refused with the same message
as before (`flagbot db upgrade` is the operator's step there), and nothing is migrated."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine

import bot.store.migrate as migrate_module
import bot.store.store as store_module
from bot.store import Store, StoreNotReadyError


def test_postgresql_behind_is_refused_not_migrated(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = create_engine("postgresql+psycopg://flagbot@127.0.0.1:1/flagbot")  # never connected
    migrated: list[object] = []
    monkeypatch.setattr(store_module, "current_revision", lambda _engine: None)
    monkeypatch.setattr(migrate_module, "upgrade", lambda *args: migrated.append(args))
    store = Store(engine)
    assert store.sqlite_file() is None
    with pytest.raises(StoreNotReadyError, match=r"schema is at nothing, .*run `flagbot db upgrade`"):
        store.prepare()
    assert migrated == []


def test_an_in_memory_sqlite_is_not_a_file() -> None:
    assert Store(create_engine("sqlite://")).sqlite_file() is None
