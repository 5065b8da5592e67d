"""The lease holder alone (`hold_lease`), against an in-memory stand-in for the store's lease
functions: what it asks the store, when it renews, how it notices a loss, and that it gives
the lease back however the block ends. tests/component/loop/test_lease_guard.py runs it on
SQLite and PostgreSQL.

Renewals are driven by a tiny ttl (a beat every few milliseconds) and awaited as events or
counts, never as fixed sleeps that assume how fast the machine is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from bot.loop.lease_guard import HeldLease, LeaseHeld, hold_lease, lost_message
from bot.store import AsyncStore
from bot.store.lease_queue import QueueTurn, WaiterInfo
from bot.store.leases import Acquired, LeaseInfo

TARGET = "t1"
ME = "cli:alice@laptop:0a1b2c3d"
BOB = "slack:bob:9f8e7d6c"
T0 = datetime(2026, 11, 29, 22, 40, 1, tzinfo=UTC)


def lease(holder: str = ME, *, at: datetime = T0, purpose: str = "bench", ttl_s: float = 60.0) -> LeaseInfo:
    return LeaseInfo(TARGET, holder, "laptop", 4242, purpose, None, at, at, ttl_s)


class FakeStore:
    """`AsyncStore.run` over a dict of leases; `fail[name]` makes that store function raise."""

    def __init__(self) -> None:
        self.store = object()
        self.rows: dict[str, LeaseInfo] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: dict[str, Exception] = {}
        self.heartbeat_answers: list[bool] = []
        """Answers the next heartbeats give, before the dict is asked."""
        self.beat = asyncio.Event()
        self.waiters: list[WaiterInfo] = []

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def kwargs(self, name: str) -> list[dict[str, Any]]:
        return [kw for called, kw in self.calls if called == name]

    async def run(self, func: Callable[..., Any], store: object, *args: Any, **kwargs: Any) -> Any:
        assert store is self.store
        name = func.__name__
        self.calls.append((name, {"args": args, **kwargs}))
        if name == "heartbeat":
            self.beat.set()
        if name in self.fail:
            raise self.fail[name]
        return getattr(self, "_" + name)(*args, **kwargs)

    def _acquire(
        self, target: str, *, holder: str, purpose: str, ttl_s: float, now: datetime | None, **_: Any
    ) -> Acquired:
        at = now or T0
        old = self.rows.get(target)
        if old is not None and old.holder != holder and not old.expired(at):
            raise LeaseHeld(old, at)
        self.rows[target] = lease(holder, at=at, purpose=purpose, ttl_s=ttl_s)
        return Acquired(self.rows[target], old if old is not None and old.holder != holder else None)

    def _heartbeat(self, target: str, *, holder: str, now: datetime | None) -> bool:
        if self.heartbeat_answers:
            return self.heartbeat_answers.pop(0)
        row = self.rows.get(target)
        return row is not None and row.holder == holder

    def _current(self, target: str) -> LeaseInfo | None:
        return self.rows.get(target)

    def _release(self, target: str, *, holder: str) -> bool:
        row = self.rows.get(target)
        if row is None or row.holder != holder:
            return False
        del self.rows[target]
        return True

    def _attach_experiment(self, target: str, *, holder: str, experiment_id: int) -> None:
        row = self.rows.get(target)
        if row is None or row.holder != holder:
            raise LookupError(f"{holder} does not hold the lease of {target}")
        self.rows[target] = replace(row, experiment_id=experiment_id)

    def _audit(self, **_: Any) -> None:
        return None

    # the waiting queue (bot.store.lease_queue): one waiter at a time here, never cancelled
    def _live_waiters(self, target: str, **_: Any) -> list[WaiterInfo]:
        return [w for w in self.waiters if w.target == target]

    def _join_queue(
        self, target: str, *, holder: str, purpose: str, deadline: datetime, **kw: Any
    ) -> WaiterInfo:
        at = kw.get("now") or T0
        waiter = WaiterInfo(
            len(self.calls),
            target,
            holder,
            purpose,
            kw["requested_by"],
            kw["command"],
            at,
            at,
            deadline,
            None,
            None,
        )
        self.waiters.append(waiter)
        return waiter

    def _poll_queue(self, waiter_id: int, **_: Any) -> QueueTurn:
        mine = [w for w in self.waiters if w.id == waiter_id]
        return QueueTurn(mine[0] if mine else None, [])

    def _leave_queue(self, waiter_id: int) -> None:
        self.waiters = [w for w in self.waiters if w.id != waiter_id]


def holding(fake: FakeStore, **kw: Any) -> Any:
    options: dict[str, Any] = {"purpose": "bench", "holder": ME, "ttl_s": 60.0, "host": "laptop", "pid": 4242}
    return hold_lease(cast(AsyncStore, fake), TARGET, **{**options, **kw})


async def beats(fake: FakeStore, count: int) -> None:
    """Until `count` heartbeats were asked for (30 s at most)."""
    async with asyncio.timeout(30):
        while len(fake.kwargs("heartbeat")) < count:
            fake.beat.clear()
            await fake.beat.wait()


async def test_a_free_target_is_taken_with_what_the_store_records_and_released() -> None:
    fake = FakeStore()
    async with holding(fake, purpose="check #3", ttl_s=45.0) as held:
        assert isinstance(held, HeldLease)
        assert (held.target, held.holder, held.taken_over) == (TARGET, ME, None)
        [asked] = fake.kwargs("acquire")
        assert asked == {
            "args": (TARGET,),
            "holder": ME,
            "host": "laptop",
            "pid": 4242,
            "purpose": "check #3",
            "ttl_s": 45.0,
            "now": None,
        }
        assert not held.lost.is_set() and held.lost_reason is None
    assert fake.names()[-1] == "release" and fake.rows == {}
    assert "audit" not in fake.names()  # nothing was taken over


async def test_a_busy_target_is_refused_and_nothing_else_is_asked() -> None:
    fake = FakeStore()
    fake.rows[TARGET] = lease(BOB, at=datetime.now(UTC))
    with pytest.raises(LeaseHeld, match=f"held by {BOB}"):
        async with holding(fake):
            pytest.fail("entered a busy target's block")
    assert fake.names() == [
        "live_waiters",
        "acquire",
    ]  # the queue, then no heartbeat, no release of bob's lease
    assert fake.rows[TARGET].holder == BOB


async def test_a_takeover_is_audited_at_the_clock_s_time() -> None:
    fake = FakeStore()
    fake.rows[TARGET] = lease(BOB, at=T0 - timedelta(hours=1), purpose="try")
    async with holding(fake, clock=lambda: T0) as held:
        assert held.taken_over is not None and held.taken_over.holder == BOB
    [audited] = fake.kwargs("audit")
    assert (audited["actor"], audited["action"], audited["target"]) == (ME, "takeover", TARGET)
    assert audited["detail"]["holder"] == BOB and audited["detail"]["purpose"] == "bench"
    assert audited["detail"]["previous"].endswith("last heartbeat 3600 s ago")  # judged at the clock's T0


async def test_heartbeats_renew_every_third_of_the_ttl_on_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeStore()
    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        pauses.append(delay)
        await real_sleep(delay)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    async with holding(fake, ttl_s=0.03, clock=lambda: T0) as held:
        await beats(fake, 3)
        assert held.beats >= 2 and not held.lost.is_set()
    assert len(pauses) >= 3 and set(pauses) == {0.01}  # ttl / 3 between beats
    beaten = fake.kwargs("heartbeat")
    assert all(kw == {"args": (TARGET,), "holder": ME, "now": T0} for kw in beaten)
    assert fake.kwargs("acquire")[0]["now"] == T0


async def test_a_failed_heartbeat_is_logged_and_the_next_one_tries_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeStore()
    fake.fail["heartbeat"] = OSError("database restarting")
    with caplog.at_level(logging.WARNING, logger="bot.loop.lease_guard"):
        async with holding(fake, ttl_s=0.03) as held:
            await beats(fake, 2)
            del fake.fail["heartbeat"]
            before = len(fake.kwargs("heartbeat"))
            await beats(fake, before + 1)
            assert not held.lost.is_set()  # a hiccup is not a loss
    assert "heartbeat of t1 failed: database restarting" in caplog.text


async def test_a_lease_taken_over_is_reported_lost_naming_the_new_holder() -> None:
    fake = FakeStore()
    async with holding(fake, ttl_s=0.03) as held:
        fake.rows[TARGET] = lease(BOB, at=datetime.now(UTC), purpose="try")
        async with asyncio.timeout(30):
            await held.lost.wait()
        assert held.lost_reason == lost_message(TARGET, fake.rows[TARGET])
        assert held.lost_reason is not None
        assert held.lost_reason.startswith(f"the lease of {TARGET} was lost (held by {BOB} on laptop")
        asked = len(fake.kwargs("heartbeat"))
        await asyncio.sleep(0.05)  # several beat intervals: a lost lease is not renewed any more
        assert len(fake.kwargs("heartbeat")) == asked
    assert fake.rows[TARGET].holder == BOB  # leaving the block did not free bob's lease


async def test_a_lease_released_by_someone_else_says_so() -> None:
    fake = FakeStore()
    async with holding(fake, ttl_s=0.03) as held:
        del fake.rows[TARGET]
        async with asyncio.timeout(30):
            await held.lost.wait()
        assert held.lost_reason == f"the lease of {TARGET} was released by someone else"


async def test_a_loss_is_reported_even_when_the_new_holder_cannot_be_read() -> None:
    fake = FakeStore()
    fake.heartbeat_answers = [False]
    fake.fail["current"] = OSError("gone")
    async with holding(fake, ttl_s=0.03) as held:
        async with asyncio.timeout(30):
            await held.lost.wait()
        assert held.lost_reason == lost_message(TARGET, None)


async def test_the_lease_is_released_when_the_block_fails() -> None:
    fake = FakeStore()

    async def load_fails_after_a_beat() -> None:
        async with holding(fake, ttl_s=0.03):
            await beats(fake, 1)
            raise RuntimeError("load failed")

    with pytest.raises(RuntimeError, match="load failed"):
        await load_fails_after_a_beat()
    assert fake.rows == {} and fake.names()[-1] == "release"
    asked = len(fake.kwargs("heartbeat"))
    await asyncio.sleep(0.05)
    assert len(fake.kwargs("heartbeat")) == asked  # the heartbeat stopped with the block


async def test_the_lease_is_released_when_the_block_is_cancelled() -> None:
    fake = FakeStore()
    inside = asyncio.Event()

    async def hold_for_ever() -> None:
        async with holding(fake):
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(hold_for_ever())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fake.rows == {} and fake.names()[-1] == "release"


async def test_a_failed_release_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeStore()
    fake.fail["release"] = OSError("connection reset")
    with caplog.at_level(logging.WARNING, logger="bot.loop.lease_guard"):
        async with holding(fake):
            pass
    assert "releasing the lease of t1 failed: connection reset" in caplog.text


async def test_attach_records_the_experiment_on_our_lease() -> None:
    fake = FakeStore()
    async with holding(fake) as held:
        await held.attach(7)
        assert fake.rows[TARGET].experiment_id == 7
        assert fake.kwargs("attach_experiment") == [{"args": (TARGET,), "holder": ME, "experiment_id": 7}]


async def test_a_ttl_that_is_not_positive_is_refused() -> None:
    fake = FakeStore()
    with pytest.raises(ValueError, match="lease ttl must be positive, got 0"):
        async with holding(fake, ttl_s=0):
            pytest.fail("held with no ttl")
    assert fake.calls == []
