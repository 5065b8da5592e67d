"""What every use case needs: the settings, the store, who acts, the lease's time to live.

Why one context object: a front end opens these once (the CLI per command, `flagbot serve` per
process) and hands the same object to every command, so no use case opens a store or reads
the environment itself.
"""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from bot.app.errors import AppError
from bot.config import Secrets, Settings
from bot.store import AsyncStore, Store

DEFAULT_LEASE_TTL_S = 60.0


def lease_ttl_s() -> float:
    """The lease's time-to-live: 60 s, or `FLAGBOT_LEASE_TTL_S` (tests shorten it to see a dead
    holder's lease expire quickly; the heartbeat renews it every third of that)."""
    raw = os.environ.get("FLAGBOT_LEASE_TTL_S", "")
    try:
        return max(1.0, float(raw)) if raw else DEFAULT_LEASE_TTL_S
    except ValueError:
        return DEFAULT_LEASE_TTL_S


def console_actor() -> str:
    """Who acts from a terminal: `cli:USER@HOST` (the audit log and the lease name them)."""
    return f"cli:{getpass.getuser()}@{socket.gethostname()}"


def cache_dir(settings: Settings) -> Path:
    """Where host flag lists are cached per SGLang version: next to the SQLite database."""
    return settings.database.sqlite_path.parent / "cache"


def evidence_dir(settings: Settings) -> Path:
    """Where evidence files (charts) are written: `state/evidence` next to the cache."""
    return cache_dir(settings).parent / "evidence"


def open_store(settings: Settings) -> Store:
    """The configured store (PostgreSQL from FLAGBOT_DATABASE_URL, else SQLite), ready to use:
    SQLite created and migrated on first use, PostgreSQL checked to be migrated (`Store.prepare`);
    AppError (a usage problem: exit 2) with the first line of what is wrong."""
    url = Secrets().database_url
    store = Store.open(url.get_secret_value() if url else None, sqlite_path=settings.database.sqlite_path)
    try:
        store.prepare()
    except Exception as exc:
        store.close()
        raise AppError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, usage=True) from None
    return store


@dataclass
class AppContext:
    """The settings and the store a use case works with, and the lease's time to live."""

    settings: Settings
    store: AsyncStore
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S

    @property
    def cache_dir(self) -> Path:
        return cache_dir(self.settings)
