"""Reads cannot starve writes (issue 17, item 7): a connection's last channels are kept for privileged commands.

Deterministic: the fake node holds every grep until the test opens a gate, and the test waits
for an event (the reads on the node reached their limit), never for time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.target.ssh_pool import MAX_CHANNELS, RESERVED_CHANNELS, ChannelSlots, pooled
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.unit.target.conftest import serving

READ_LIMIT = MAX_CHANNELS - RESERVED_CHANNELS


@dataclass
class GatedNode(FakeNode):
    """A node whose `journalctl --grep` runs until `gate` opens; `full` is set once `READ_LIMIT` run."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    full: asyncio.Event = field(default_factory=asyncio.Event)
    greps: int = 0
    peak_greps: int = 0

    async def _handle(self, process: Any) -> None:
        if "--grep" not in (process.command or ""):
            await super()._handle(process)
            return
        self.greps += 1
        self.peak_greps = max(self.peak_greps, self.greps)
        if self.greps >= READ_LIMIT:
            self.full.set()
        try:
            await self.gate.wait()
            await super()._handle(process)
        finally:
            self.greps -= 1


def test_the_reserve_leaves_reads_most_channels() -> None:
    assert 0 < RESERVED_CHANNELS < MAX_CHANNELS
    assert READ_LIMIT >= MAX_CHANNELS // 2


async def test_eight_slow_greps_leave_a_stop_its_channel_and_queue_instead_of_failing(tmp_path: Path) -> None:
    """The issue's scene: viewers' greps hold every read channel (and more wait); an operator's
    `systemctl stop` on the same pooled connection runs at once and succeeds; the greps then all
    finish (queued, none refused)."""
    node = GatedNode(FakeSystemd())
    async with serving(tmp_path, [node]) as fake, pooled(), fake.open() as viewers, fake.open() as operator:
        greps = [
            asyncio.ensure_future(viewers.node0.run("journal-grep", pattern="error"))
            for _ in range(MAX_CHANNELS + 4)
        ]
        await node.full.wait()
        stop = await operator.node0.run("stop")
        assert stop.ok and node.systemd.active == "inactive"
        assert not any(task.done() for task in greps)  # the stop did not wait for a read to finish
        assert node.greps == READ_LIMIT  # the rest of the reads wait for a slot, off the node
        node.gate.set()
        results = await asyncio.gather(*greps)
    assert all(result.ok for result in results)
    assert node.peak_greps == READ_LIMIT
    assert node.logins == 1  # one pooled connection: the reserve is per connection


async def test_a_read_waits_at_the_read_limit_and_a_write_takes_a_reserved_slot() -> None:
    slots = ChannelSlots(total=4, reserved=2)
    for _ in range(2):
        await slots.acquire(privileged=False)
    third_read = asyncio.ensure_future(slots.acquire(privileged=False))
    await asyncio.sleep(0)
    assert not third_read.done() and slots.reads == 2
    await slots.acquire(privileged=True)
    await slots.acquire(privileged=True)
    assert slots.busy == 4
    slots.release(privileged=True)  # a free slot, but a reserved one: the read still waits
    await asyncio.sleep(0)
    assert not third_read.done()
    slots.release(privileged=False)
    await third_read
    assert (slots.busy, slots.reads) == (3, 2)


async def test_writes_may_take_every_slot() -> None:
    slots = ChannelSlots(total=4, reserved=2)
    for _ in range(4):
        await slots.acquire(privileged=True)
    assert slots.busy == 4 and slots.reads == 0


async def test_a_freed_slot_goes_to_a_waiting_write_before_earlier_reads() -> None:
    slots = ChannelSlots(total=3, reserved=1)
    await slots.acquire(privileged=False)
    await slots.acquire(privileged=True)
    await slots.acquire(privileged=True)
    read = asyncio.ensure_future(slots.acquire(privileged=False))
    await asyncio.sleep(0)
    write = asyncio.ensure_future(slots.acquire(privileged=True))
    await asyncio.sleep(0)
    slots.release(privileged=True)
    await write
    assert not read.done()
    slots.release(privileged=True)
    await read
    assert (slots.busy, slots.reads) == (3, 2)


async def test_a_wait_given_up_holds_no_slot() -> None:
    slots = ChannelSlots(total=2, reserved=1)
    await slots.acquire(privileged=False)
    waiting = asyncio.ensure_future(slots.acquire(privileged=False))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    slots.release(privileged=False)
    assert (slots.busy, slots.reads) == (0, 0)
    await slots.acquire(privileged=False)
    assert slots.reads == 1


async def test_a_slot_granted_as_its_wait_is_cancelled_is_given_back() -> None:
    slots = ChannelSlots(total=1, reserved=0)
    await slots.acquire(privileged=True)
    waiting = asyncio.ensure_future(slots.acquire(privileged=True))
    await asyncio.sleep(0)
    slots.release(privileged=True)  # granted to `waiting`, which has not run yet ...
    waiting.cancel()  # ... and is cancelled before it does (a wait_for timing out)
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert slots.busy == 0


def test_a_reserve_as_large_as_the_connection_is_refused() -> None:
    with pytest.raises(ValueError, match="fewer than all channels"):
        ChannelSlots(total=2, reserved=2)
