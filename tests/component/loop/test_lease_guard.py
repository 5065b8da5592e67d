"""`hold_lease`, the one lease holder, on a real store: SQLite in tmp_path and the real PostgreSQL.

Waiting is driven by events (the guard's `on_wait` callback tells the test it is waiting), and
the heartbeat test waits for the store to show a renewal past the ttl, never for a fixed time.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from bot.loop.lease_guard import HeldLease, LeaseHeld, hold_lease, holder_id
from bot.store import AsyncStore
from bot.store.experiments import create_experiment
from bot.store.leases import LeaseInfo, acquire, current, release
from bot.store.models import utcnow
from bot.store.records import audit_events

TARGET = "t1"
ME = "cli:alice@laptop:0a1b2c3d"
BOB = "slack:bob:9f8e7d6c"


async def bob_holds(store: AsyncStore, **kw: object) -> LeaseInfo:
    got = await store.run(acquire, store.store, TARGET, holder=BOB, host="bot-1", pid=7, purpose="try", **kw)  # type: ignore[arg-type]
    lease: LeaseInfo = got.lease
    return lease


def test_holder_ids_are_unique_per_run() -> None:
    first, second = holder_id("cli:alice@laptop"), holder_id("cli:alice@laptop")
    assert first.startswith("cli:alice@laptop:") and len(first.rsplit(":", 1)[1]) == 8
    assert first != second


async def test_a_free_target_is_held_for_the_block_and_released(store: AsyncStore) -> None:
    async with hold_lease(store, TARGET, purpose="bench", holder=ME, ttl_s=60) as held:
        lease = await store.run(current, store.store, TARGET)
        assert lease is not None
        assert (lease.holder, lease.purpose, lease.ttl_s) == (ME, "bench", 60.0)
        assert held.lease.holder == ME and held.taken_over is None
        assert not held.lost.is_set()
    assert await store.run(current, store.store, TARGET) is None


async def test_the_lease_is_released_when_the_block_fails(store: AsyncStore) -> None:
    with pytest.raises(RuntimeError, match="load failed"):
        async with hold_lease(store, TARGET, purpose="bench", holder=ME, ttl_s=60):
            raise RuntimeError("load failed")
    assert await store.run(current, store.store, TARGET) is None


async def test_a_held_lease_is_refused_naming_holder_and_experiment(store: AsyncStore) -> None:
    exp = await store.run(
        create_experiment, store.store, target=TARGET, playbook="try", params={}, actor="slack:bob"
    )
    await bob_holds(store, experiment_id=exp.id)
    waits: list[LeaseHeld] = []
    entered = False
    with pytest.raises(LeaseHeld) as refused:
        async with hold_lease(
            store, TARGET, purpose="bench", holder=ME, ttl_s=60, on_wait=lambda b, _: waits.append(b)
        ):
            entered = True
    message = str(refused.value)
    assert message.startswith(
        f"{TARGET} is busy: held by {BOB} on bot-1 (pid 7) for experiment #{exp.id} (try)"
    )
    assert " since " in message and refused.value.lease.holder == BOB
    assert not entered and waits == []  # wait_s=0: no waiting, no callback
    lease = await store.run(current, store.store, TARGET)
    assert lease is not None and lease.holder == BOB  # the refusal left bob's lease alone


async def test_a_bounded_wait_ends_in_the_refusal(store: AsyncStore) -> None:
    await bob_holds(store)
    remaining: list[float] = []
    started = asyncio.get_running_loop().time()
    with pytest.raises(LeaseHeld, match=f"held by {BOB}"):
        async with hold_lease(
            store,
            TARGET,
            purpose="bench",
            holder=ME,
            ttl_s=60,
            wait_s=0.6,
            on_wait=lambda _, r: remaining.append(r),
        ):
            pytest.fail("the lease was never free")
    elapsed = asyncio.get_running_loop().time() - started
    assert elapsed >= 0.6  # it waited its whole budget (how much longer is the machine's load)
    assert len(remaining) == 1 and 0 < remaining[0] <= 0.6  # told once: the holder never changed


async def test_a_waiter_gets_the_lease_when_the_holder_releases_it(store: AsyncStore) -> None:
    await bob_holds(store)
    waiting = asyncio.Event()
    told: list[str] = []

    def on_wait(busy: LeaseHeld, remaining_s: float) -> None:
        told.append(busy.lease.holder)
        waiting.set()

    async def bob_finishes() -> bool:
        await waiting.wait()
        released: bool = await store.run(release, store.store, TARGET, holder=BOB)
        return released

    bob = asyncio.create_task(bob_finishes())
    async with hold_lease(
        store, TARGET, purpose="bench", holder=ME, ttl_s=60, wait_s=60, on_wait=on_wait
    ) as held:
        assert await bob
        assert told == [BOB]
        assert held.waited_s > 0 and held.taken_over is None
        lease = await store.run(current, store.store, TARGET)
        assert lease is not None and lease.holder == ME
    assert await store.run(current, store.store, TARGET) is None


async def test_cancelling_a_waiter_takes_nothing(store: AsyncStore) -> None:
    await bob_holds(store)
    waiting = asyncio.Event()

    async def wait_for_it() -> None:
        async with hold_lease(
            store, TARGET, purpose="bench", holder=ME, ttl_s=60, wait_s=60, on_wait=lambda *_: waiting.set()
        ):
            pytest.fail("the lease was never free")

    waiter = asyncio.create_task(wait_for_it())
    await asyncio.wait_for(waiting.wait(), timeout=30)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    lease = await store.run(current, store.store, TARGET)
    assert lease is not None and lease.holder == BOB


async def test_an_expired_lease_is_taken_over_and_audited(store: AsyncStore) -> None:
    stale = await bob_holds(store, ttl_s=60, now=utcnow() - timedelta(hours=1))
    async with hold_lease(store, TARGET, purpose="bench", holder=ME, ttl_s=60) as held:
        assert held.taken_over is not None
        assert (held.taken_over.holder, held.taken_over.acquired_at) == (BOB, stale.acquired_at)
        lease = await store.run(current, store.store, TARGET)
        assert lease is not None and lease.holder == ME
    [event] = await store.run(audit_events, store.store, TARGET)
    assert (event.action, event.actor, event.detail["holder"]) == ("takeover", ME, BOB)
    assert await store.run(current, store.store, TARGET) is None


async def renewed_past(store: AsyncStore, held: HeldLease, seconds: float) -> LeaseInfo:
    """The stored lease, once a heartbeat has renewed it more than `seconds` after it was taken."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        lease = await store.run(current, store.store, TARGET)
        assert lease is not None and lease.holder == ME
        if lease.heartbeat_at > held.lease.acquired_at + timedelta(seconds=seconds):
            return lease
        assert asyncio.get_running_loop().time() < deadline, "no heartbeat renewed the lease"
        await asyncio.sleep(0.02)  # a poll of the store, not a wait for the outcome


async def test_heartbeats_keep_the_lease_alive_past_its_ttl(store: AsyncStore) -> None:
    ttl = 0.6  # renewed every 0.2 s
    async with hold_lease(store, TARGET, purpose="bench", holder=ME, ttl_s=ttl) as held:
        lease = await renewed_past(store, held, 2 * ttl)
        now = lease.heartbeat_at
        assert held.lease.expired(now)  # without the heartbeats it would be stale by now ...
        assert not lease.expired(now)  # ... but it is alive
        with pytest.raises(LeaseHeld, match=f"held by {ME}"):
            await store.run(
                acquire, store.store, TARGET, holder=BOB, host="bot-1", pid=7, purpose="try", now=now
            )
        assert held.beats >= 3 and not held.lost.is_set()


async def test_a_lease_taken_from_the_holder_is_reported_lost_and_not_released(store: AsyncStore) -> None:
    async with hold_lease(store, TARGET, purpose="bench", holder=ME, ttl_s=0.6) as held:
        later = utcnow() + timedelta(seconds=30)  # our lease looks stale to bob's clock
        await bob_holds(store, now=later)
        await asyncio.wait_for(held.lost.wait(), timeout=30)
        assert held.lost_reason is not None and f"held by {BOB}" in held.lost_reason
    lease = await store.run(current, store.store, TARGET)
    assert lease is not None and lease.holder == BOB  # leaving the block did not free bob's lease


async def test_attach_names_the_experiment_on_the_stored_lease(store: AsyncStore) -> None:
    exp = await store.run(
        create_experiment, store.store, target=TARGET, playbook="try", params={}, actor="cli:alice"
    )
    assert exp.id is not None
    async with hold_lease(store, TARGET, purpose="try", holder=ME, ttl_s=60) as held:
        await held.attach(exp.id)
        lease = await store.run(current, store.store, TARGET)
        assert lease is not None and (lease.holder, lease.experiment_id) == (ME, exp.id)


async def test_the_clock_dates_the_lease_and_its_renewals(store: AsyncStore) -> None:
    later = utcnow() + timedelta(minutes=5)  # an engine's test clock, moved forward
    async with hold_lease(store, TARGET, purpose="try", holder=ME, ttl_s=0.6, clock=lambda: later) as held:
        assert held.lease.acquired_at == later
        deadline = asyncio.get_running_loop().time() + 30
        while held.beats < 1:
            assert asyncio.get_running_loop().time() < deadline, "no heartbeat renewed the lease"
            await asyncio.sleep(0.02)  # a poll of the holder, not a wait for the outcome
        lease = await store.run(current, store.store, TARGET)
        assert lease is not None and lease.heartbeat_at == later


async def test_a_lease_released_by_someone_else_is_reported_lost(store: AsyncStore) -> None:
    async with hold_lease(store, TARGET, purpose="bench", holder=ME, ttl_s=0.6) as held:
        assert await store.run(release, store.store, TARGET, holder=ME)
        await asyncio.wait_for(held.lost.wait(), timeout=30)
        assert held.lost_reason == f"the lease of {TARGET} was released by someone else"
    assert await store.run(current, store.store, TARGET) is None
