"""Shared pieces of the SSH / unit / drop-in / restart integration tests (issue 4, items 1-4).

Kept apart from `support.py` (readiness, observe, ...) so two authors never edit one file. Every
test that changes a node uses `on_baseline`: afterwards links are up, nodes thawed, and when a
node's drop-in or process differs from the start, both nodes get the neutral drop-in and both
ranks are restarted together, then node 0 must answer `/health` 200 again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest_asyncio

from bot.config import load_settings
from bot.config.schema import Target
from bot.target.dropin import read_dropin
from bot.target.restart import restore_vendor_and_restart
from bot.target.session import TargetSession
from bot.target.ssh import Auditor, NodeSession
from bot.target.unit import read_state, read_unit
from flagbot_lab.testbed import Testbed

CONNECT_S = 3.0
COMMAND_S = 8.0
STOP_S = 10.0


def target_for(bed: Testbed, **ssh: Any) -> Target:
    """The testbed's own config (`twin.toml`), with short timeouts so failures are quick."""
    target = load_settings(bed.config_path, required=True).targets["twin"]
    settings = target.ssh.model_copy(
        update={
            "connect_timeout": timedelta(seconds=CONNECT_S),
            "command_timeout": timedelta(seconds=COMMAND_S),
            **ssh,
        }
    )
    timeouts = target.timeouts.model_copy(update={"stop": timedelta(seconds=STOP_S)})
    return target.model_copy(update={"ssh": settings, "timeouts": timeouts})


@asynccontextmanager
async def units_on_node(
    bed: Testbed, k: int, units: Mapping[str, str], files: Sequence[Path] = ()
) -> AsyncIterator[NodeSession]:
    """Extra units on node `k` (loaded, never started), removed afterwards with `files` (paths
    under the node's root the caller wrote for them), and systemd reloaded both times."""
    directory = bed.layout.root(k) / "etc/systemd/system"
    for name, text in units.items():
        (directory / name).write_text(text)
    async with session_for(bed) as ts:
        await ts.nodes[k].run("daemon-reload")
        try:
            yield ts.nodes[k]
        finally:
            for path in [*(directory / name for name in units), *files]:
                path.unlink(missing_ok=True)
            await ts.nodes[k].run("daemon-reload")


@asynccontextmanager
async def session_for(
    bed: Testbed, *, audit: Auditor | None = None, **ssh: Any
) -> AsyncIterator[TargetSession]:
    async with TargetSession.open("twin", target_for(bed, **ssh), audit=audit) as ts:
        yield ts


async def _snapshot(bed: Testbed) -> list[tuple[str | None, str | None]]:
    async with session_for(bed) as ts:
        states = [await read_state(node) for node in ts.nodes]
        dropins = [await read_dropin(node) for node in ts.nodes]
    return [(s.invocation_id, d) for s, d in zip(states, dropins, strict=True)]


async def restore_baseline(bed: Testbed) -> None:
    """Neutral drop-in on both nodes, both ranks restarted together, node 0 healthy again."""
    for k in range(len(bed.addresses)):
        bed.set_link(k, True)
        bed.set_frozen(k, False)
    async with session_for(bed) as ts:
        await restore_vendor_and_restart(ts, force=True)
        await bed.wait_healthy_async(timeout=180)
        views = [await read_unit(node) for node in ts.nodes]
    for view in views:
        assert view.vendor is not None and view.flags == view.vendor.flags, view.node


@pytest_asyncio.fixture(loop_scope="session")
async def on_baseline(testbed: Testbed) -> AsyncIterator[Callable[[], None]]:
    """Leave both nodes as found, or on the baseline flags (restarted together) if they changed."""
    before = await _snapshot(testbed)
    yield lambda: None
    for k in range(len(testbed.addresses)):
        testbed.set_link(k, True)
        testbed.set_frozen(k, False)
    after = await _snapshot(testbed)
    changed_process = [b[0] != a[0] for b, a in zip(before, after, strict=True)]
    if any(changed_process):
        await restore_baseline(testbed)
    elif before != after:  # only the drop-in file changed: put the neutral one back, no restart
        async with session_for(testbed) as ts:
            from bot.target.dropin import write_dropin

            for node in ts.nodes:
                await write_dropin(node, ts.ledger, None, force=True)
