"""Alembic, driven from code: `flagbot db upgrade` works from any directory and from an installed package."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
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


def head_revision(engine: Engine) -> str | None:
    """The newest migration script's revision, read from the scripts (`SCHEMA_HEAD` is its copy)."""
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def known_revisions(engine: Engine) -> set[str]:
    """Every revision of this flagbot's migration scripts."""
    return {
        script.revision for script in ScriptDirectory.from_config(alembic_config(engine)).walk_revisions()
    }
