"""Alembic, driven from code: `flagbot db upgrade` works from any directory and from an installed package."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", "bot.store:migrations")
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Create or migrate the schema to `revision`."""
    command.upgrade(alembic_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision(engine: Engine) -> str | None:
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
