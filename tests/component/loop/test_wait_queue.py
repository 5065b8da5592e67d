"""The waiting queue through `hold_lease` (docs/commands.md, `wait=DURATION`): a released lease
goes to the oldest waiter, a dead waiter does not block the queue, a command that does not wait
cannot jump it, and a cancelled waiter ends having taken nothing. Readiness is the waiters'
`on_wait` (each is queued when it is told whom it waits for), no sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.loop.lease_guard import hold_lease
from bot.store import AsyncStore, Store
from bot.store.lease_queue import cancel_waiter, join_queue, live_waiters
from bot.store.leases import LeaseHeld, QueueAhead, WaitCancelled, current
from bot.store.models import utcnow

TARGET = "lab"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    astore = AsyncStore(opened)
    yield astore
    astore._executor.shutdown(wait=True)
    opened.close()


async def held_by_bob(store: AsyncStore, released: asyncio.Event) -> asyncio.Task[None]:
    """Bob holds the lease until `released` is set; returns once he holds it."""

    async def holder() -> None:
        async with hold_lease(store, TARGET, purpose="try", holder="slack:bob:0123abcd", ttl_s=60):
            await released.wait()

    holding = asyncio.create_task(holder())
    while await store.run(current, store.store, TARGET) is None:  # yields to the holder until it holds it
        await asyncio.sleep(0)
    return holding


async def queued_waiter(
    store: AsyncStore, name: str, order: list[str], queued_as: list[int]
) -> tuple[asyncio.Task[None], asyncio.Event]:
    """Start a waiting command and return once it is queued (told whom it waits for)."""
    queued = asyncio.Event()

    def on_wait(busy: LeaseHeld, _remaining_s: float) -> None:
        if busy.queued_as is not None and not queued.is_set():
            queued_as.append(busy.queued_as)
        queued.set()

    async def run() -> None:
        async with hold_lease(
            store, TARGET, purpose="try", holder=f"{name}:0123abcd", ttl_s=60, wait_s=600, on_wait=on_wait
        ):
            order.append(name)

    task = asyncio.create_task(run())
    await queued.wait()
    return task, queued


async def test_a_released_lease_goes_to_the_oldest_of_three_waiters(store: AsyncStore) -> None:
    order: list[str] = []
    ids: list[int] = []
    released = asyncio.Event()

    holding = await held_by_bob(store, released)
    tasks = [
        (await queued_waiter(store, name, order, ids))[0] for name in ("slack:U1", "slack:U2", "slack:U3")
    ]
    assert len(ids) == 3
    queue = await store.run(live_waiters, store.store, TARGET, stale_after_s=15)
    assert [w.requested_by for w in queue] == ["slack:U1", "slack:U2", "slack:U3"]
    released.set()
    await asyncio.gather(holding, *tasks)
    assert order == ["slack:U1", "slack:U2", "slack:U3"]
    assert await store.run(live_waiters, store.store, TARGET, stale_after_s=15) == []  # rows removed


async def test_a_command_that_does_not_wait_is_refused_while_a_waiter_is_queued(store: AsyncStore) -> None:
    now = utcnow()
    await store.run(
        join_queue,
        store.store,
        TARGET,
        holder="slack:U1:0123abcd",
        purpose="try",
        requested_by="slack:U1",
        command="try --x=1",
        deadline=now + timedelta(minutes=30),
        now=now,
    )
    with pytest.raises(QueueAhead) as refused:
        async with hold_lease(store, TARGET, purpose="restart", holder="slack:U2:0123abcd", ttl_s=60):
            pytest.fail("the lease was free but a waiter was queued: it must not be taken")
    assert "1 command(s) waiting for it" in str(refused.value) and "try by slack:U1" in str(refused.value)
    assert await store.run(current, store.store, TARGET) is None  # nothing was taken


async def test_a_dead_waiter_does_not_block_the_queue(store: AsyncStore) -> None:
    long_ago = utcnow() - timedelta(minutes=5)
    await store.run(  # queued, then its process died: never seen again
        join_queue,
        store.store,
        TARGET,
        holder="slack:U1:0123abcd",
        purpose="try",
        requested_by="slack:U1",
        command="try --x=1",
        deadline=long_ago + timedelta(hours=1),
        now=long_ago,
    )
    async with hold_lease(store, TARGET, purpose="restart", holder="slack:U2:0123abcd", ttl_s=60) as held:
        assert held.holder == "slack:U2:0123abcd"


async def test_a_cancelled_waiter_ends_having_taken_nothing(store: AsyncStore) -> None:
    order: list[str] = []
    ids: list[int] = []
    released = asyncio.Event()

    holding = await held_by_bob(store, released)
    task, _ = await queued_waiter(store, "slack:U1", order, ids)
    await store.run(cancel_waiter, store.store, ids[0], actor="slack:U9")
    with pytest.raises(WaitCancelled, match=rf"waiter {ids[0]} \(try on lab\) was cancelled by slack:U9"):
        await task
    assert order == []  # the block never ran
    assert await store.run(live_waiters, store.store, TARGET, stale_after_s=15) == []
    released.set()
    await holding
