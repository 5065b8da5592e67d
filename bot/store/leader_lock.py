"""Which `flagbot serve` runs the scheduler: a PostgreSQL session-level advisory lock.

Why an advisory lock and not a lease row with a time to live: the lock belongs to a database
session, and PostgreSQL ends the session (and frees the lock) as soon as the leader's connection
closes. A SIGKILLed leader's kernel closes its socket at once, so a standing-by replica gets the
lock at its next ask, without waiting out a TTL, and without trusting the hosts' clocks (a lease
row compares heartbeats written by one host's clock with another host's "now"). A leader whose
host vanishes without closing its socket is found by TCP keepalives, which the lock's session
turns on (`KEEPALIVE_SETTINGS`: about 25 s), so the lock is free within the 30 s a takeover may take.
The price: the lock must sit on one connection held for as long as the replica leads, outside
the pool's churn (`AdvisoryLeaderLock` keeps its own).

SQLite is one host and one bot: `SoleLeader` always leads, as before replicas existed.
"""

from __future__ import annotations

import logging
from typing import Protocol

from sqlalchemy import Connection, Engine, text

__all__ = ["LEADER_LOCK_KEY", "AdvisoryLeaderLock", "LeaderLock", "SoleLeader", "leader_lock_for"]

log = logging.getLogger(__name__)

LEADER_LOCK_KEY = 0x666C6167626F74
"""The advisory lock's key: "flagbot" in ASCII, one bigint, the same in every replica."""

KEEPALIVE_SETTINGS = (
    "SET tcp_keepalives_idle = 10",
    "SET tcp_keepalives_interval = 5",
    "SET tcp_keepalives_count = 3",
)
"""The server side of the lock's session probes a silent client after 10 s, every 5 s, 3 times:
a leader whose host vanished loses the lock after about 25 s."""


class LeaderLock(Protocol):
    """The scheduler's lock as the election sees it (`bot.schedule.election`)."""

    def try_acquire(self) -> bool:
        """Take the lock when it is free; True when this process holds it now."""
        ...

    def held(self) -> bool:
        """True while the lock is still this process's (its session alive)."""
        ...

    def release(self) -> None:
        """Give the lock up (a replica standing down); nothing when it is not held."""
        ...


class SoleLeader:
    """SQLite: one bot on one host, always the leader."""

    def try_acquire(self) -> bool:
        return True

    def held(self) -> bool:
        return True

    def release(self) -> None:
        return None


class AdvisoryLeaderLock:
    """`pg_try_advisory_lock` on a connection of its own, kept while this replica leads."""

    def __init__(self, engine: Engine, key: int = LEADER_LOCK_KEY) -> None:
        self._engine = engine
        self._key = key
        self._connection: Connection | None = None
        self._holding = False

    def _open(self) -> Connection:
        if self._connection is None:
            # autocommit: a session-level lock outlives transactions, and an open transaction held
            # for days would be "idle in transaction" (killed by servers that time those out)
            connection = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            for setting in KEEPALIVE_SETTINGS:
                connection.execute(text(setting))
            self._connection = connection
        return self._connection

    def _drop(self) -> None:
        """Forget a connection that failed: its session (and any lock) is gone or going."""
        connection, self._connection, self._holding = self._connection, None, False
        if connection is not None:
            try:
                connection.invalidate()
                connection.close()
            except Exception as exc:  # already broken: nothing more to free
                log.debug("closing the leader lock's broken connection: %s", exc)

    def try_acquire(self) -> bool:
        try:
            connection = self._open()
            got = connection.execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key}
            ).scalar_one()
        except Exception:
            self._drop()
            raise
        self._holding = bool(got)
        return self._holding

    def held(self) -> bool:
        if not self._holding or self._connection is None:
            return False
        try:
            self._connection.execute(text("SELECT 1")).scalar_one()
        except Exception as exc:  # the session is gone: so is the lock, whoever has it now
            log.warning("the leader lock's connection failed: %s", exc)
            self._drop()
            return False
        return True

    def release(self) -> None:
        if self._connection is None:
            return
        try:
            if self._holding:
                self._connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})
        except Exception as exc:  # the session ending frees the lock anyway
            log.warning("could not unlock the leader lock: %s", exc)
        finally:
            self._drop()


def leader_lock_for(engine: Engine) -> LeaderLock:
    """The advisory lock on PostgreSQL; on any other database (SQLite) the process always leads."""
    if engine.dialect.name == "postgresql":
        return AdvisoryLeaderLock(engine)
    return SoleLeader()
