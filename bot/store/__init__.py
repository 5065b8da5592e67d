"""flagbot's store: sqlmodel tables, Alembic migrations, and one repository API (sync and async)."""

from bot.store.models import Measurement, Snapshot
from bot.store.store import AsyncStore, Store, StoreNotReadyError

__all__ = ["AsyncStore", "Measurement", "Snapshot", "Store", "StoreNotReadyError"]
