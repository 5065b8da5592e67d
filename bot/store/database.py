"""Engines for SQLite (the default, in `state/`) and PostgreSQL (from `FLAGBOT_DATABASE_URL`).

SQLite is opened in WAL mode with foreign keys on and a busy timeout, so a CLI run and the bot
can share one file; PostgreSQL URLs are pointed at psycopg 3, the driver flagbot installs.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

DEFAULT_SQLITE_PATH = Path("state/flagbot.db")


def database_url(explicit: str | None, sqlite_path: Path = DEFAULT_SQLITE_PATH) -> str:
    """The URL to use: the environment's if given, else the SQLite file (its folder is created)."""
    if explicit:
        url = make_url(explicit)
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        return url.render_as_string(hide_password=False)
    sqlite_path.expanduser().parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{sqlite_path.expanduser()}"


def make_engine(url: str) -> Engine:
    """An engine with the per-backend settings flagbot relies on."""
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def _sqlite_pragmas(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
    finally:
        cursor.close()
