"""The drift watch over a fleet, as `flagbot serve` runs it: five targets of two nodes watched at
once, twice, inside one connection pool (`bot.target.ssh_pool.pooled`, as serve). Each node is
logged in to once for both rounds (the pool reuses connections; none per job), and no node ever
ran more commands at once than a connection's read channels (`ChannelSlots`: every command of the
watch is a read). Figures (time, memory, 50 targets) are bench/fleet_scale.py's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app.drift import DriftOutcome, watch_drift
from bot.app.notify import MemoryNotifier
from bot.app.runtime import ScheduleRuntime
from bot.store import AsyncStore
from bot.target.ssh_pool import MAX_CHANNELS, RESERVED_CHANNELS, pooled
from tests.support.fleet import (
    NODES_PER_TARGET,
    Fleet,
    fleet_settings,
    running_fleet,
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
    settings = fleet_settings(
        fleet.ports(),
        key_path=fleet.keys.client_key,
        known_hosts=fleet.known_hosts,
        http_port=fleet.http_port,
        state_dir=tmp_path / "state",
    )
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
