"""Runs a dead replica left in flight (`bot.app.replicas.settle_orphaned_runs`, the leader's job
`settle-orphans`): a process running a playbook is SIGKILLed mid-step; once its lease's time to
live has passed, the leader settles the run (resumed or rolled back) and tells its thread, without
any command being run. While a run's lease is alive, nothing is touched."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app.notify import MemoryNotifier
from bot.app.replicas import settle_orphaned_runs
from bot.app.runtime import ScheduleRuntime
from bot.config import Settings
from bot.loop.report import RunOutcome
from bot.store import AsyncStore
from bot.store.experiments import create_experiment, get_experiment
from bot.store.leases import acquire
from bot.store.loop_models import UNFINISHED_STATUSES
from bot.target.nodestate import Backoff
from tests.support.loop_actions import CRASHY, Probe, registered_actions
from tests.support.schedule import migrated_store

ROOT = Path(__file__).parents[3]
TTL_S = 2.0
CHANNEL = "C0FLAGBOT"


@pytest.fixture
def probe() -> Iterator[Probe]:
    with registered_actions() as registered:
        yield registered


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    """SQLite: the killed process (tests/support/loop_crash.py) opens the same file."""
    wrapped = AsyncStore(migrated_store("sqlite", tmp_path))
    yield wrapped
    await wrapped.aclose()


def runtime(store: AsyncStore, tmp_path: Path, books: Path, notifier: MemoryNotifier) -> ScheduleRuntime:
    settings = Settings(
        database={"sqlite_path": tmp_path / "state" / "flagbot.db"},
        playbook_dirs=[books],
        slack={"investigation_channel": CHANNEL},
    )
    return ScheduleRuntime(settings, store, notifier, lease_ttl_s=TTL_S)


def books_in(tmp_path: Path) -> Path:
    books = tmp_path / "books"
    books.mkdir()
    (books / "crashy.yaml").write_text("name: crashy\n" + textwrap.dedent(CRASHY), encoding="utf-8")
    return books


async def killed_mid_step(tmp_path: Path, books: Path) -> None:
    """A replica's run of `crashy` on t1, SIGKILLed while its step waits on gate `g`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.loop_crash",
        str(tmp_path / "state" / "flagbot.db"),
        str(books),
        str(TTL_S),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert line.strip() == b"arrived"
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()


async def settled_within(rt: ScheduleRuntime, timeout: float) -> list[RunOutcome]:
    """Run the leader's job until it settles something (what its 10 s interval does)."""
    backoff = Backoff(0.1, 1.5, 1.0)
    deadline = datetime.now(UTC) + timedelta(seconds=timeout)
    while datetime.now(UTC) < deadline:
        settled = await settle_orphaned_runs(rt)
        if settled:
            return settled
        await backoff.sleep()
    raise AssertionError(f"nothing settled within {timeout:.0f} s")


@pytest.mark.parametrize("resume", [True, False])
async def test_a_run_on_a_killed_replica_is_settled_by_the_leader_and_its_thread_told(
    tmp_path: Path, store: AsyncStore, probe: Probe, resume: bool
) -> None:
    books = books_in(tmp_path)
    await killed_mid_step(tmp_path, books)
    probe.resume_answer = {"resume": resume, "why": "flags as intended" if resume else "flags differ"}
    probe.gate("g").set()
    notifier = MemoryNotifier()
    [outcome] = await settled_within(runtime(store, tmp_path, books, notifier), timeout=30 + TTL_S)
    assert outcome.status == ("succeeded" if resume else "rolled-back")
    row = await store.run(get_experiment, store.store, outcome.experiment_id)
    assert row is not None and row.status == outcome.status
    [told] = notifier.notices
    assert f"experiment #{outcome.experiment_id} (crashy) on t1" in told.text and outcome.status in told.text
    assert await settle_orphaned_runs(runtime(store, tmp_path, books, MemoryNotifier())) == []  # once


async def test_a_run_whose_lease_is_alive_is_left_alone(tmp_path: Path, store: AsyncStore) -> None:
    experiment = await store.run(
        create_experiment, store.store, target="t1", playbook="crashy", params={}, actor="slack:U0OPER"
    )
    assert experiment.status in UNFINISHED_STATUSES  # what the leader would settle, were the lease dead
    await store.run(acquire, store.store, "t1", holder="bot-2", host="bot-2", pid=7, purpose="try", ttl_s=600)
    notifier = MemoryNotifier()
    assert await settle_orphaned_runs(runtime(store, tmp_path, books_in(tmp_path), notifier)) == []
    row = await store.run(get_experiment, store.store, experiment.id)
    assert row is not None and row.status == experiment.status and notifier.notices == []
