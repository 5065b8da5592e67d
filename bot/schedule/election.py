"""Which of several `flagbot serve` runs the scheduler, and what the others do meanwhile.

APScheduler 3 cannot share a job store between running schedulers (two would run every job
twice), so exactly one replica, the leader, runs it; the others stand by and ask again every
`replicas.election_interval`. Leadership is a PostgreSQL session-level advisory lock held on a
connection of its own (`bot.store.leader_lock`, which says why a lock and not a lease row): a
SIGKILLed leader's session ends with its socket, and the next ask of a standing-by replica wins.
On SQLite the process always leads, as it did before replicas.

A replica whose code is older than the database's schema (a newer flagbot ran `flagbot db
upgrade` during a rolling upgrade) stands down: it gives the lock up, stops its scheduler and
never asks for it again until restarted with the new code; its health endpoint and its log say so.

`Elector.step` is the decision, synchronous and free of timers so that unit tests drive it
with a fake lock and a fake schema; `Elector.run` calls it every interval and starts or stops
the scheduler (`lead`) when the answer changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, suppress
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from bot.store.leader_lock import LeaderLock
from bot.store.models import utcnow
from bot.store.schema_revision import SCHEMA_HEAD

__all__ = ["ElectionState", "Elector", "Role", "Turn"]

log = logging.getLogger(__name__)


class Role(StrEnum):
    LEADER = "leader"
    STANDBY = "standby"
    STOOD_DOWN = "stood-down"


class Turn(StrEnum):
    """What one step of the election changed."""

    WON = "won"
    KEPT = "kept"
    LOST = "lost"
    WAITING = "waiting"
    STOOD_DOWN = "stood-down"


@dataclass
class ElectionState:
    """This replica's place, as the health endpoint reports it."""

    role: Role = Role.STANDBY
    since: datetime | None = None
    reason: str | None = None
    """Why this replica is not (or no longer) leading, when it is not for lack of the lock."""

    @property
    def leader(self) -> bool:
        return self.role is Role.LEADER


class Elector:
    """Runs `lead()` (the scheduler) while this replica holds the leader lock."""

    def __init__(
        self,
        lock: LeaderLock,
        *,
        schema_revision: Callable[[], str | None],
        lead: Callable[[], AbstractAsyncContextManager[object]],
        interval_s: float,
        code_revision: str = SCHEMA_HEAD,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._lock = lock
        self._schema_revision = schema_revision
        self._lead = lead
        self._interval_s = interval_s
        self._code_revision = code_revision
        self._clock = clock
        self.state = ElectionState()

    def _become(self, role: Role, reason: str | None = None) -> None:
        if role is not self.state.role:
            self.state = ElectionState(role, self._clock(), reason)

    def step(self) -> Turn:
        """One look: stand down on a schema this code does not know, keep or lose the lock when
        leading, ask for it when standing by. Blocking (database calls): run it in a thread."""
        if self.state.role is Role.STOOD_DOWN:
            return Turn.WAITING  # until restarted with the new code
        revision = self._schema_revision()
        if revision != self._code_revision:
            reason = (
                f"the database schema is at {revision or 'nothing'}, this flagbot's code knows "
                f"{self._code_revision}: standing down (restart it with the flagbot that migrated "
                "the database)"
            )
            self._lock.release()
            self._become(Role.STOOD_DOWN, reason)
            return Turn.STOOD_DOWN
        if self.state.leader:
            if self._lock.held():
                return Turn.KEPT
            self._become(Role.STANDBY, "lost the leader lock (its database connection failed)")
            return Turn.LOST
        if self._lock.try_acquire():
            self._become(Role.LEADER)
            return Turn.WON
        return Turn.WAITING

    async def _step(self) -> Turn:
        try:
            return await asyncio.to_thread(self.step)
        except Exception as exc:  # the database is away: a leader cannot know it still leads
            log.warning("leader election could not reach the database: %s", exc)
            if self.state.leader:
                await asyncio.to_thread(self._lock.release)
                self._become(Role.STANDBY, f"the database could not be reached: {exc}")
                return Turn.LOST
            return Turn.WAITING

    async def run(self, stop: asyncio.Event) -> None:
        """Elect, lead and stand by until `stop` is set; the scheduler stops and the lock is
        given up on the way out (a SIGKILL skips this: PostgreSQL frees the lock then)."""
        leading = AsyncExitStack()
        try:
            while not stop.is_set():
                turn = await self._step()
                if turn is Turn.WON:
                    log.warning("this replica is now the leader: the scheduler starts here")
                    try:
                        await leading.enter_async_context(self._lead())
                    except Exception as exc:  # a leader without a scheduler would hold the lock for nothing
                        log.error("the scheduler could not start (%s): giving the leadership up", exc)
                        await asyncio.to_thread(self._lock.release)
                        self._become(Role.STANDBY, f"the scheduler could not start: {exc}")
                elif turn is Turn.STOOD_DOWN:
                    log.error("%s", self.state.reason)
                    await leading.aclose()
                elif turn is Turn.LOST:
                    log.warning("this replica no longer leads: %s", self.state.reason)
                    await leading.aclose()
                with suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self._interval_s)
        finally:
            await leading.aclose()
            await asyncio.to_thread(self._lock.release)
