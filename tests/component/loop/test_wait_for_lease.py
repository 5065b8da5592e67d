"""`wait=DURATION` on a busy target, on the fake target layer (tests/support/loop_fake_target.py)
with the real engine, steps and store: a run asked with a wait starts once the holder before it
lets the lease go (it is told whom it waits for first), and one whose wait runs out gives up with
LeaseHeld having written nothing. Readiness is an event set by the waiter's `on_wait`, no sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app.context import AppContext
from bot.app.freeze import freeze
from bot.app.freeze_state import FrozenError
from bot.app.playbooks import resolve_playbook
from bot.app.runs import run_playbook
from bot.app.waiters import waiting_text
from bot.commands import parse_command
from bot.loop.engine import Engine
from bot.loop.lease_guard import hold_lease
from bot.loop.report import MemoryReporter
from bot.store import AsyncStore, Store
from bot.store.experiments import list_experiments
from bot.store.leases import LeaseHeld, acquire
from tests.support.loop_fake_target import START_FLAGS, TARGET, faked_target, settings


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    astore = AsyncStore(opened)
    yield astore
    astore._executor.shutdown(wait=True)
    opened.close()


def engine(tmp_path: Path, store: AsyncStore) -> Engine:
    return Engine(settings(tmp_path), store, MemoryReporter(), cache_dir=tmp_path / "cache")


async def test_a_run_with_wait_starts_after_the_holder_before_it_lets_go(
    tmp_path: Path, store: AsyncStore
) -> None:
    told: list[str] = []
    waiting = asyncio.Event()
    order: list[str] = []

    def on_wait(busy: LeaseHeld, remaining_s: float) -> None:
        told.append(waiting_text(busy, remaining_s))
        waiting.set()

    taken = asyncio.Event()

    async def first_run() -> None:
        async with hold_lease(store, TARGET, purpose="try", holder="slack:bob", ttl_s=60):
            taken.set()
            await waiting.wait()  # the second run is waiting for us: now finish
            order.append("first ended")

    with faked_target(store.store) as fake:
        first = asyncio.create_task(first_run())
        await taken.wait()  # the first holds the lease before the second asks
        outcome = await engine(tmp_path, store).run(
            "restart", {}, target=TARGET, actor="cli:alice", wait_s=600, on_wait=on_wait
        )
        order.append("second ended")
        await first
    assert outcome.status == "succeeded", outcome.summary
    assert fake.restarts == [START_FLAGS]  # the second run did restart, after the first let go
    assert order == ["first ended", "second ended"]
    assert len(told) == 1 and told[0].startswith(f"waiting for try by slack:bob to finish on {TARGET}; ")
    assert "will start when it does, at most until " in told[0]


async def test_a_run_whose_wait_runs_out_gives_up_with_lease_held_and_writes_nothing(
    tmp_path: Path, store: AsyncStore
) -> None:
    await store.run(
        acquire,
        store.store,
        TARGET,
        holder="slack:bob",
        host="bot-1",
        pid=7,
        purpose="try",
        experiment_id=None,
    )
    with faked_target(store.store) as fake, pytest.raises(LeaseHeld, match="held by slack:bob"):
        await engine(tmp_path, store).run("restart", {}, target=TARGET, actor="cli:alice", wait_s=0.01)
    assert fake.restarts == []
    assert await store.run(list_experiments, store.store, TARGET) == []


async def test_a_freeze_set_while_it_waited_refuses_the_run_once_it_has_the_lease(
    tmp_path: Path, store: AsyncStore
) -> None:
    config = settings(tmp_path)
    ctx = AppContext(config, store)
    call = resolve_playbook(config, parse_command(["restart", "wait=10m", f"target={TARGET}"]))
    assert call.wait_s == 600
    waiting = asyncio.Event()
    taken = asyncio.Event()

    async def first_run() -> None:
        async with hold_lease(store, TARGET, purpose="try", holder="slack:bob", ttl_s=60):
            taken.set()
            await waiting.wait()
            await freeze(ctx, TARGET, reason="change window", until=None, actor="slack:carol")

    with faked_target(store.store) as fake:
        first = asyncio.create_task(first_run())
        await taken.wait()
        with pytest.raises(FrozenError, match="change window"):
            await run_playbook(
                ctx,
                call,
                MemoryReporter(),
                actor="cli:alice",
                admin=True,
                restart_approved=True,
                on_wait=lambda _busy, _left: waiting.set(),
            )
        await first
    assert fake.restarts == []
    assert await store.run(list_experiments, store.store, TARGET) == []
