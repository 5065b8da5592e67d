"""The election's decisions (`bot.schedule.election.Elector`) with a fake lock, a fake schema and
a fake clock: who leads, when the scheduler starts and stops, and the stand-down of a replica
whose code is older than the database. The real lock (PostgreSQL) is in the component tier."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bot.schedule.election import Elector, Role, Turn
from bot.store.leader_lock import SoleLeader
from bot.store.schema_revision import SCHEMA_HEAD

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


@dataclass
class SharedLock:
    """One advisory lock between fake replicas: whoever holds it keeps it until it releases or
    its "session" dies (`kill`)."""

    holder: str | None = None


@dataclass
class FakeLock:
    shared: SharedLock
    name: str
    released: int = 0

    def try_acquire(self) -> bool:
        if self.shared.holder is None:
            self.shared.holder = self.name
        return self.shared.holder == self.name

    def held(self) -> bool:
        return self.shared.holder == self.name

    def release(self) -> None:
        if self.shared.holder == self.name:
            self.shared.holder = None
            self.released += 1

    def kill(self) -> None:
        """The replica's process died: PostgreSQL ends its session and frees the lock."""
        if self.shared.holder == self.name:
            self.shared.holder = None


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Scheduler:
    """Counts the scheduler's starts and stops (what `lead()` would run)."""

    running: int = 0
    starts: list[datetime] = field(default_factory=list)


def elector(lock: FakeLock, schema: list[str | None], clock: Clock, scheduler: Scheduler) -> Elector:
    @asynccontextmanager
    async def lead() -> AsyncIterator[None]:
        scheduler.running += 1
        scheduler.starts.append(clock())
        try:
            yield
        finally:
            scheduler.running -= 1

    return Elector(lock, schema_revision=lambda: schema[0], lead=lead, interval_s=5, clock=clock)


def test_one_of_two_replicas_leads_and_the_other_takes_over_when_it_dies() -> None:
    shared, clock = SharedLock(), Clock()
    schema: list[str | None] = [SCHEMA_HEAD]
    first_lock, second_lock = FakeLock(shared, "a"), FakeLock(shared, "b")
    first = elector(first_lock, schema, clock, Scheduler())
    second = elector(second_lock, schema, clock, Scheduler())

    assert first.step() is Turn.WON and second.step() is Turn.WAITING
    assert (first.state.role, second.state.role) == (Role.LEADER, Role.STANDBY)
    assert first.step() is Turn.KEPT and second.step() is Turn.WAITING

    clock.now += timedelta(seconds=7)
    first_lock.kill()  # SIGKILL: no release, the session ends
    assert second.step() is Turn.WON
    assert second.state.leader and second.state.since == T0 + timedelta(seconds=7)
    assert first.step() is Turn.LOST  # had it survived (a dropped connection), it knows it lost
    assert first.state.role is Role.STANDBY and "lost the leader lock" in (first.state.reason or "")


def test_a_replica_older_than_the_schema_stands_down_and_gives_the_lock_up() -> None:
    shared, clock = SharedLock(), Clock()
    schema: list[str | None] = [SCHEMA_HEAD]
    old_lock = FakeLock(shared, "old")
    old = elector(old_lock, schema, clock, Scheduler())
    assert old.step() is Turn.WON

    schema[0] = "9999"  # a newer flagbot ran `flagbot db upgrade`
    assert old.step() is Turn.STOOD_DOWN
    assert old.state.role is Role.STOOD_DOWN and old_lock.released == 1 and shared.holder is None
    assert "schema is at 9999" in (old.state.reason or "") and SCHEMA_HEAD in (old.state.reason or "")
    schema[0] = SCHEMA_HEAD
    assert old.step() is Turn.WAITING and old.state.role is Role.STOOD_DOWN  # until restarted


def test_a_standby_never_leads_on_a_schema_it_does_not_know() -> None:
    shared = SharedLock()
    fresh = elector(FakeLock(shared, "x"), ["9999"], Clock(), Scheduler())
    assert fresh.step() is Turn.STOOD_DOWN and shared.holder is None


def test_sqlite_always_leads() -> None:
    sole = Elector(SoleLeader(), schema_revision=lambda: SCHEMA_HEAD, lead=_unused, interval_s=1)
    assert sole.step() is Turn.WON and sole.step() is Turn.KEPT


@asynccontextmanager
async def _unused() -> AsyncIterator[None]:
    raise AssertionError("not started in this test")
    yield


async def until(condition: object, what: str) -> None:
    """Wait on a condition with a deadline (the loop yields; nothing stands in for readiness)."""
    for _ in range(10_000):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def test_run_starts_the_scheduler_when_leading_and_stops_it_on_losing_and_on_stop() -> None:
    shared, clock, scheduler = SharedLock(), Clock(), Scheduler()
    lock = FakeLock(shared, "a")
    schema: list[str | None] = [SCHEMA_HEAD]
    replica = Elector(
        lock,
        schema_revision=lambda: schema[0],
        lead=elector(lock, schema, clock, scheduler)._lead,
        interval_s=0.01,
        clock=clock,
    )
    stop = asyncio.Event()
    running = asyncio.ensure_future(replica.run(stop))
    await until(lambda: scheduler.running == 1, "the scheduler to start")
    lock.kill()
    await until(lambda: scheduler.running == 0, "the scheduler to stop once the lock is lost")
    await until(lambda: scheduler.running == 1, "the scheduler to start again on the next win")
    stop.set()
    await running
    assert scheduler.running == 0 and len(scheduler.starts) == 2
    assert shared.holder is None  # given up on the way out


async def test_a_database_that_does_not_answer_makes_the_leader_stop_its_scheduler() -> None:
    shared, clock, scheduler = SharedLock(), Clock(), Scheduler()
    lock = FakeLock(shared, "a")
    answers = [True]

    def schema() -> str | None:
        if not answers[0]:
            raise ConnectionError("server closed the connection")
        return SCHEMA_HEAD

    replica = Elector(
        lock,
        schema_revision=schema,
        lead=elector(lock, [SCHEMA_HEAD], clock, scheduler)._lead,
        interval_s=0.01,
    )
    stop = asyncio.Event()
    running = asyncio.ensure_future(replica.run(stop))
    await until(lambda: scheduler.running == 1, "the scheduler to start")
    answers[0] = False
    await until(lambda: scheduler.running == 0, "the scheduler to stop")
    assert replica.state.role is Role.STANDBY and "could not be reached" in (replica.state.reason or "")
    stop.set()
    await running


async def test_a_scheduler_that_cannot_start_gives_the_leadership_up_and_is_tried_again() -> None:
    shared, attempts = SharedLock(), [0]
    lock = FakeLock(shared, "a")

    @asynccontextmanager
    async def failing_then_fine() -> AsyncIterator[None]:
        attempts[0] += 1
        if attempts[0] == 1:
            raise ConnectionError("the job store did not answer")
        yield

    replica = Elector(lock, schema_revision=lambda: SCHEMA_HEAD, lead=failing_then_fine, interval_s=0.01)
    stop = asyncio.Event()
    running = asyncio.ensure_future(replica.run(stop))
    await until(lambda: attempts[0] == 2 and replica.state.leader, "a second, successful start")
    assert lock.released >= 1  # the first win was given back, so another replica could lead
    stop.set()
    await running
