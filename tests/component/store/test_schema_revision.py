"""The schema check without Alembic (bot/store/schema_revision.py) says what Alembic would say.

Why a test: `Store.prepare` compares the database with `SCHEMA_HEAD` and reads the version table
itself, so that a command does not import Alembic and read its scripts on every start. A new
migration that forgets the constant, or a version table read differently from Alembic's, would
let a command run on the wrong schema; both are checked here on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import pytest
from alembic import command
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from bot.store import Store
from bot.store.migrate import alembic_config, head_revision, known_revisions, upgrade
from bot.store.schema_revision import SCHEMA_HEAD, VERSION_TABLE, SchemaRevisionError, current_revision


def alembic_says(store: Store) -> str | None:
    with store.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def test_the_constant_is_the_newest_migration_script(empty_store: Store) -> None:
    assert head_revision(empty_store.engine) == SCHEMA_HEAD
    assert SCHEMA_HEAD in known_revisions(empty_store.engine)


def test_the_revision_read_matches_alembic_at_every_step(empty_store: Store) -> None:
    assert current_revision(empty_store.engine) is None  # nothing migrated yet: no version table
    for revision in sorted(known_revisions(empty_store.engine)):
        upgrade(empty_store.engine, revision)
        assert current_revision(empty_store.engine) == alembic_says(empty_store) == revision
    command.downgrade(alembic_config(empty_store.engine), "base")
    assert current_revision(empty_store.engine) == alembic_says(empty_store) is None  # table kept, empty


def test_a_version_table_with_two_revisions_is_refused(empty_store: Store) -> None:
    upgrade(empty_store.engine)
    with empty_store.engine.begin() as connection:
        connection.execute(text(f"INSERT INTO {VERSION_TABLE} (version_num) VALUES ('elsewhere')"))
    with pytest.raises(SchemaRevisionError, match=rf"several schema revisions \({SCHEMA_HEAD}, elsewhere\)"):
        current_revision(empty_store.engine)
