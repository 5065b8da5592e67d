"""The drift watch over a fleet, as `flagbot serve` runs it: five targets of two nodes watched at
once, twice, inside one connection pool (`bot.target.ssh_pool.pooled`, as serve). Each node is
logged in to once for both rounds (the pool reuses connections; none per job), and no node ever
ran more commands at once than a connection's read channels (`ChannelSlots`: every command of the
watch is a read). Figures (time, memory, 50 targets) are bench/fleet_scale.py's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from bot.app.checks import run_check
from bot.app.drift import DriftOutcome, watch_drift
from bot.app.notify import MemoryNotifier
from bot.app.runtime import ScheduleRuntime
from bot.store import AsyncStore
from bot.target.session import TargetSession
from bot.target.ssh_pool import MAX_CHANNELS, RESERVED_CHANNELS, pooled
from tests.support.fake_node import Gauge
from tests.support.fleet import (
    NODES_PER_TARGET,
    Fleet,
    running_fleet,
    seed_checks,
    seed_known_good,
)
from tests.support.schedule import migrated_store

TARGETS = 5


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    async with running_fleet(tmp_path / "fleet", TARGETS) as running:
        yield running


async def test_five_targets_watched_at_once_reuse_one_connection_per_node_and_stay_in_their_channels(
    fleet: Fleet, tmp_path: Path
) -> None:
    settings = fleet.settings(tmp_path / "state")
    store = AsyncStore(migrated_store("sqlite", tmp_path))
    rt = ScheduleRuntime(settings, store, MemoryNotifier(), cache_dir=tmp_path / "cache")
    try:
        for target in settings.targets:  # a known-good start each: the watch observes its capacity
            await seed_known_good(settings, store, target, rt.cache())
        fleet.restart_counts()
        rounds: list[list[DriftOutcome]] = []
        async with pooled():
            for _ in range(2):
                rounds.append(await asyncio.gather(*(watch_drift(rt, t) for t in settings.targets)))
            counts = fleet.counts()
        assert fleet.counts()["connections_open"] == 0  # the pool closed them with its block
    finally:
        await store.aclose()
    for outcomes in rounds:
        assert [o.skipped for o in outcomes] == [None] * TARGETS
        assert [o.findings for o in outcomes] == [[]] * TARGETS
    assert counts["connections_opened"] == TARGETS * NODES_PER_TARGET  # one login per node, both rounds
    assert counts["most_logins_per_node"] == 1
    assert counts["connections_peak"] == TARGETS * NODES_PER_TARGET
    assert counts["channels_opened"] > 2 * TARGETS * NODES_PER_TARGET  # the watch ran commands on each
    assert 1 <= counts["channels_peak_per_node"] <= MAX_CHANNELS - RESERVED_CHANNELS
    assert counts["channels_peak"] <= TARGETS * NODES_PER_TARGET * (MAX_CHANNELS - RESERVED_CHANNELS)


async def test_scheduled_looks_wait_their_turn_drift_watches_and_checks_alike(
    fleet: Fleet, tmp_path: Path
) -> None:
    """Every due job starts at once; only `looks_at_once` targets are looked at together (the
    fleet's channel peak stays bounded whatever its size), and every job still runs."""
    settings = fleet.settings(tmp_path / "state")
    store = AsyncStore(migrated_store("sqlite", tmp_path))
    sessions = Gauge()

    @asynccontextmanager
    async def counted(target: str) -> AsyncIterator[TargetSession]:
        sessions.up()
        try:
            async with TargetSession.open(target, settings.targets[target], store=store) as ts:
                yield ts
        finally:
            sessions.down()

    rt = ScheduleRuntime(
        settings,
        store,
        MemoryNotifier(),
        cache_dir=tmp_path / "cache",
        session_factory=counted,
        looks_at_once=2,
    )
    try:
        checks = []
        for target in settings.targets:
            snapshot_id = await seed_known_good(settings, store, target, rt.cache())
            checks += await seed_checks(store, target, snapshot_id, [timedelta(minutes=10)])
        async with pooled():
            watched, checked = await asyncio.gather(
                asyncio.gather(*(watch_drift(rt, t) for t in settings.targets)),
                asyncio.gather(*(run_check(rt, c.id) for c in checks if c.id is not None)),
            )
    finally:
        await store.aclose()
    assert sessions.opened == 2 * TARGETS and sessions.now == 0
    assert sessions.peak == 2  # five watches and five checks due at once, two targets at a time
    assert all(o.skipped is None or "busy" in o.skipped for o in watched)  # a check may hold its lease
    assert [c.recorded.run.result if c else None for c in checked] == ["pass"] * TARGETS
