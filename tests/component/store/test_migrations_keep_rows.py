"""Upgrading from every earlier schema revision to the current one keeps every row (issue 10 item 7).

For each revision R: a fresh database is migrated to R, every table that exists at R gets
rows (values made from each column's reflected type, parents before children), the database is
upgraded to head, and every row is read back with the same values in every column it had at R.
The same on SQLite and on a real PostgreSQL. A revision that rewrote a table and dropped rows or
values would fail here, whichever table it was.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from alembic.script import ScriptDirectory
from sqlalchemy import JSON, Boolean, Column, DateTime, Float, Integer, MetaData, Numeric, Table, select, text
from sqlalchemy import types as sqltypes

from bot.store import Store
from bot.store.migrate import alembic_config, upgrade

ROWS_PER_TABLE = 3
SKIP_TABLES = {"alembic_version"}


def _revisions(store: Store) -> list[str]:
    script = ScriptDirectory.from_config(alembic_config(store.engine))
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def _value(table: Table, column: Column[Any], row: int) -> Any:
    """A value of the column's type, distinct per row, pointing at row `row` of a parent table."""
    if column.foreign_keys:
        return row  # parents get ids 1..ROWS_PER_TABLE, inserted first
    kind = column.type
    if isinstance(kind, Boolean):
        return row % 2 == 0
    if isinstance(kind, Integer):
        return row if column.primary_key else 1000 + row
    if isinstance(kind, Float | Numeric):
        return 0.5 + row
    if isinstance(kind, DateTime):
        return datetime(2026, 11, 20 + row, 8, 30, tzinfo=UTC)
    if isinstance(kind, JSON):
        return {"table": table.name, "row": row, "list": [1, 2]}
    if isinstance(kind, sqltypes.LargeBinary):  # APScheduler's pickled job state (0006)
        return f"{table.name}-{row}".encode()
    if isinstance(kind, sqltypes.String | sqltypes.Text):
        length = getattr(kind, "length", None) or 64
        return f"{column.name}-{row}"[:length]
    raise AssertionError(f"{table.name}.{column.name}: no sample value for type {kind!r}; teach this test")


def _fill(store: Store) -> dict[str, list[dict[str, Any]]]:
    meta = MetaData()
    meta.reflect(store.engine)
    written: dict[str, list[dict[str, Any]]] = {}
    with store.engine.begin() as connection:
        for table in meta.sorted_tables:
            if table.name in SKIP_TABLES:
                continue
            rows = [
                {column.name: _value(table, column, n) for column in table.columns}
                for n in range(1, ROWS_PER_TABLE + 1)
            ]
            connection.execute(table.insert(), rows)
            written[table.name] = rows
    return written


def _normal(value: Any) -> Any:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value.startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def test_every_revision_upgrades_to_head_keeping_every_row(empty_store: Store) -> None:
    store = empty_store
    revisions = _revisions(store)
    assert len(revisions) >= 6, revisions
    for revision in revisions[:-1]:
        with store.engine.begin() as connection:  # start each revision from an empty database
            if store.backend == "sqlite":
                names = [
                    r[0]
                    for r in connection.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))
                ]
                connection.execute(text("PRAGMA foreign_keys=OFF"))
                for name in names:
                    connection.execute(text(f'DROP TABLE IF EXISTS "{name}"'))
                connection.execute(text("PRAGMA foreign_keys=ON"))
            else:
                connection.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
        upgrade(store.engine, revision)
        written = _fill(store)
        assert written, f"no tables at revision {revision}"
        upgrade(store.engine, "head")
        after = MetaData()
        after.reflect(store.engine)
        with store.engine.connect() as connection:
            for name, rows in written.items():
                assert name in after.tables, f"{name} (from {revision}) is gone at head"
                table = after.tables[name]
                got = [
                    dict(r._mapping) for r in connection.execute(select(table).order_by(*table.primary_key))
                ]
                assert len(got) == len(rows), f"{name}: {len(rows)} rows at {revision}, {len(got)} at head"
                for before, now in zip(rows, got, strict=True):
                    for column, value in before.items():
                        assert _normal(now[column]) == _normal(value), (revision, name, column)
