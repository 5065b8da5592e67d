"""The store's API: one object the CLI, Slack and the scheduler all use the same way.

`Store` is synchronous (SQLAlchemy sessions); `AsyncStore` runs the same calls on a worker
thread so database work never blocks the bot's event loop. SQLite gets one worker thread
(it serialises writers anyway); PostgreSQL gets a few.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from bot.store.database import DEFAULT_SQLITE_PATH, database_url, make_engine
from bot.store.models import Measurement, Snapshot
from bot.store.schema_revision import SCHEMA_HEAD, current_revision

P = ParamSpec("P")
R = TypeVar("R")


class StoreNotReadyError(RuntimeError):
    """The schema is not this flagbot's head (PostgreSQL behind, or any backend ahead); the message
    says to run `flagbot db upgrade`."""


class Store:
    """Repository functions over one engine. Every write is committed before it returns."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str | None = None, *, sqlite_path: Path = DEFAULT_SQLITE_PATH) -> Store:
        return cls(make_engine(database_url(url, sqlite_path)))

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def upgrade(self) -> str | None:
        """Migrate to the newest revision; returns it. On SQLite under the migration lock (`prepare`)."""
        # deferred: Alembic and its scripts (~0.4 s of CPU) load only when the schema moves
        from bot.store.migrate import upgrade

        with self._migration_lock():
            upgrade(self.engine)
            return current_revision(self.engine)

    def revision(self) -> str | None:
        return current_revision(self.engine)

    def check_ready(self) -> None:
        """Refuse to run on a schema that is missing or behind, instead of failing mid-experiment."""
        current = current_revision(self.engine)
        if current != SCHEMA_HEAD:
            raise StoreNotReadyError(
                f"database schema is at {current or 'nothing'}, this flagbot needs {SCHEMA_HEAD}: "
                "run `flagbot db upgrade`"
            )

    def prepare(self) -> str | None:
        """Make the store ready to use, or refuse: the step every command runs before its work.

        SQLite, the embedded default, is created and migrated here on first use (a file that does
        not exist yet, or a schema behind this flagbot), so nobody runs `flagbot db upgrade` by
        hand for it. Two processes starting at once on a new file take turns: the check and the
        migration happen under an exclusive lock on `<file>.migrate.lock` (flock: released by the
        kernel even when a process dies), so the second finds the schema at head and does nothing.
        A schema *ahead* of this flagbot (a newer version wrote it) is refused, never touched.
        PostgreSQL is only checked (StoreNotReadyError saying to run `flagbot db upgrade`), as a
        shared server's schema is the operator's to migrate. Returns the revision in use."""
        if self.sqlite_file() is None:
            self.check_ready()
            return current_revision(self.engine)
        with self._migration_lock():
            current = current_revision(self.engine)
            if current != SCHEMA_HEAD:
                self._migrate(current)
            self.check_ready()
            return current_revision(self.engine)

    @contextlib.contextmanager
    def _migration_lock(self) -> Iterator[None]:
        """An exclusive flock on `<sqlite file>.migrate.lock` (nothing for other backends)."""
        path = self.sqlite_file()
        if path is None:
            yield
            return
        path.parent.mkdir(parents=True, exist_ok=True)  # as for the default path: a new file's folder
        with path.with_name(path.name + ".migrate.lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def sqlite_file(self) -> Path | None:
        """The SQLite database file, None for another backend or an in-memory SQLite."""
        if self.backend != "sqlite":
            return None
        name = self.engine.url.database
        return Path(name) if name and name != ":memory:" else None

    def _migrate(self, current: str | None) -> None:
        """Bring a schema that is behind (or missing) to the head; refuse one this flagbot does not
        know (a newer flagbot wrote it, or something else), touching nothing."""
        # deferred: Alembic and its scripts (~0.4 s of CPU) load only when the schema moves
        from bot.store.migrate import known_revisions, upgrade

        if current is not None and current not in known_revisions(self.engine):
            self.check_ready()  # ahead of (or foreign to) this flagbot: refuse, touch nothing
        upgrade(self.engine)

    def add(self, row: R) -> R:
        """Insert or update one row and return it refreshed (ids filled in)."""
        with Session(self.engine, expire_on_commit=False) as session:
            session.add(row)
            session.commit()
            session.refresh(row)
            return row

    def latest_snapshot(self, target: str) -> Snapshot | None:
        with Session(self.engine) as session:
            query = select(Snapshot).where(Snapshot.target == target).order_by(col(Snapshot.id).desc())
            return session.exec(query.limit(1)).first()

    def snapshots(self, target: str, *, limit: int = 50) -> Sequence[Snapshot]:
        with Session(self.engine) as session:
            query = select(Snapshot).where(Snapshot.target == target).order_by(col(Snapshot.id).desc())
            return session.exec(query.limit(limit)).all()

    def measurements(self, *, snapshot_id: int) -> Sequence[Measurement]:
        with Session(self.engine) as session:
            query = (
                select(Measurement)
                .where(Measurement.snapshot_id == snapshot_id)
                .order_by(col(Measurement.concurrency), col(Measurement.repeat))
            )
            return session.exec(query).all()

    def close(self) -> None:
        self.engine.dispose()


class AsyncStore:
    """The same Store, awaited: each call runs on the store's own worker thread(s)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        workers = 1 if store.backend == "sqlite" else 4
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="flagbot-db")
        self._in_flight: dict[Hashable, asyncio.Future[Any]] = {}

    async def run(self, func: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run any Store method (or a function of the store) off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(func, *args, **kwargs))

    async def run_shared(self, key: Hashable, func: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """`run` a read, or, when a read under the same `key` is in flight, wait for that one and
        share its result (or its error). For reads whose callers accept an answer read a moment
        before they asked: a burst of commands on one target then asks the store once, not once
        per command, each trip costing the event loop a hand-over to the store's thread."""
        pending = self._in_flight.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self.run(func, *args, **kwargs))
            self._in_flight[key] = pending

            def _done(finished: asyncio.Future[Any]) -> None:
                if self._in_flight.get(key) is finished:
                    del self._in_flight[key]
                if not finished.cancelled():
                    finished.exception()  # retrieved: every waiter may have been cancelled

            pending.add_done_callback(_done)
        return cast(R, await asyncio.shield(pending))

    async def aclose(self) -> None:
        self._executor.shutdown(wait=True)
        self.store.close()
