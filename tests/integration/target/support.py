"""Shared pieces of the target-control integration tests (readiness, observe, grep, rollback, CLI).

Fixtures live here rather than in a `conftest.py` so the target tests of different authors do
not share one file; each test module imports the fixtures it uses. Every test that changes the
unit leaves both nodes on the baseline: `back_to_baseline` writes the neutral drop-in on both
nodes, clears a tripped start limit and restarts both ranks together, then waits for ready.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from bot.config import load_settings
from bot.store import AsyncStore, Store
from bot.target.readiness import wait_ready
from bot.target.restart import restore_vendor_and_restart
from bot.target.session import TargetSession
from flagbot_lab.testbed import Testbed

TRUTH = "var/lib/sglang-twin/truth.jsonl"


def target_of(bed: Testbed) -> Any:
    return load_settings(bed.config_path, required=True).targets["twin"]


@pytest_asyncio.fixture(loop_scope="session")
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    astore = AsyncStore(sync)
    try:
        yield astore
    finally:
        await astore.aclose()


@pytest_asyncio.fixture(loop_scope="session")
async def ts(testbed: Testbed, store: AsyncStore) -> AsyncIterator[TargetSession]:
    """The testbed's target with a fresh store per test (known-good starts empty)."""
    async with TargetSession.open("twin", target_of(testbed), store=store) as session:
        yield session


async def back_to_baseline(session: TargetSession) -> None:
    report = await restore_vendor_and_restart(session, force=True)
    previous = {node.node: node.old_invocation for node in report.nodes}
    result = await wait_ready(
        session.nodes, base_url=session.target.http_base(), timeout=120, previous=previous
    )
    assert result.ready, result.to_json()


@pytest_asyncio.fixture(loop_scope="session")
async def baseline_after(ts: TargetSession) -> AsyncIterator[None]:
    """Put both nodes back on the vendor line after a test that changes the unit."""
    try:
        yield
    finally:
        await back_to_baseline(ts)


def truth_records(bed: Testbed, k: int = 0) -> list[dict[str, Any]]:
    path = bed.layout.root(k) / TRUTH
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )


def truth_start(bed: Testbed, pid: int | None = None, k: int = 0) -> dict[str, Any] | None:
    starts = [
        r for r in truth_records(bed, k) if r.get("kind") == "start" and (pid is None or r.get("pid") == pid)
    ]
    return starts[-1] if starts else None


def truth_ready_moment(bed: Testbed, pid: int) -> float | None:
    """When the twin of `pid` turned ready, from its ground truth.

    A `ready` moment recorded by the twin is used when there is one; the truth file of this
    twin has none, so it is the end of the warmup request (`POST /generate` of 8 tokens), right
    after which the twin sets its status to up and prints the ready line (lab/flagbot_lab/twin runtime).
    """
    for record in truth_records(bed):
        if record.get("pid") != pid:
            continue
        for key in ("ready_unix", "ready_at", "ready"):
            if record.get("kind") in ("start", "ready") and isinstance(record.get(key), int | float):
                return float(record[key])
    warmups = [
        r
        for r in truth_records(bed)
        if r.get("kind") == "request" and r.get("pid") == pid and r.get("endpoint") == "/generate"
    ]
    if not warmups:
        return None
    first = min(warmups, key=lambda r: r["arrival_unix"])
    return float(first["arrival_unix"] + first.get("last_actual_s", 0.0))


async def await_truth_ready(bed: Testbed, pid: int, timeout: float = 5.0) -> float | None:
    """`truth_ready_moment`, waiting for the twin's once-a-second truth flush."""
    from bot.target.readiness import Backoff

    backoff = Backoff(0.1, 1.5, 0.5)
    deadline = time.monotonic() + timeout
    while (moment := truth_ready_moment(bed, pid)) is None and time.monotonic() < deadline:
        await backoff.sleep()
    return moment


async def invocations_now(session: TargetSession) -> dict[str, str | None]:
    """Each node's InvocationID now (`restart_target`'s report does not record the old ones)."""
    from bot.target.nodestate import node_state

    return {node.name: (await node_state(node)).invocation for node in session.nodes}
