"""Which schema revision a database is at, and which one this flagbot needs, read without Alembic.

Why its own module: every command checks the schema before its work (`Store.prepare`), and
Alembic with its migration scripts costs about 0.4 s of CPU to import and read, more than a quick
command such as `flagbot status` may spend before its first call. The check needs one constant and
one query; Alembic (bot/store/migrate.py) is loaded only when the schema has to move.
`SCHEMA_HEAD` is held equal to the newest migration script by
tests/component/store/test_schema_revision.py, so a new migration cannot land without it.
"""

from __future__ import annotations

from sqlalchemy import Engine, inspect, text

SCHEMA_HEAD = "0011"
"""The revision of the newest script in bot/store/migrations/versions/."""

VERSION_TABLE = "alembic_version"
"""Where Alembic records the revision a database is at (its default name, which env.py keeps)."""

READ_REVISIONS = text("SELECT version_num FROM alembic_version")


class SchemaRevisionError(RuntimeError):
    """The version table holds more than one revision: branches this flagbot never creates."""


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at; None for a database no migration has touched."""
    with engine.connect() as connection:
        if not inspect(connection).has_table(VERSION_TABLE):
            return None
        revisions = list(connection.execute(READ_REVISIONS).scalars())
    if len(revisions) > 1:
        raise SchemaRevisionError(
            f"the database records several schema revisions ({', '.join(sorted(revisions))}); "
            "flagbot's migrations are one line, so this database was migrated by something else"
        )
    return revisions[0] if revisions else None
