"""`restart` as its built-in playbook (plan_restart, restart, await_start) on the fake target layer
(tests/support/loop_fake_target.py) with the real steps, engine and store: one restart on the same
flags, the start observed; a dry run restarts nothing; a hand-edited unit is refused with its
diff; the target's lease is taken (a held lease refuses it). The real restart is exercised on the
nspawn testbed: tests/integration/loop/test_restart_testbed.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter
from bot.loop.run_state import RunState
from bot.store import AsyncStore, Store
from bot.store.experiments import get_experiment
from bot.store.leases import LeaseHeld, acquire
from bot.target.evidence import TextBlock
from tests.support.loop_fake_target import START_FLAGS, TARGET, faked_target, settings


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    astore = AsyncStore(opened)
    yield astore
    astore._executor.shutdown(wait=True)
    opened.close()


def engine(tmp_path: Path, store: AsyncStore, reporter: MemoryReporter) -> Engine:
    return Engine(settings(tmp_path), store, reporter, cache_dir=tmp_path / "cache")


def texts(reporter: MemoryReporter) -> dict[str, str]:
    return {block.title: block.text for block, _ in reporter.blocks if isinstance(block, TextBlock)}


async def test_restart_restarts_once_on_the_same_flags_and_observes_the_start(
    tmp_path: Path, store: AsyncStore
) -> None:
    reporter = MemoryReporter()
    with faked_target(store.store) as fake:
        outcome = await engine(tmp_path, store, reporter).run("restart", {}, target=TARGET, actor="cli:alice")
    assert outcome.status == "succeeded", outcome.summary
    assert fake.restarts == [START_FLAGS] and fake.flags == START_FLAGS
    shown = texts(reporter)
    assert shown["Restart plan"].startswith(f"will stop every rank of {TARGET} (1 node(s))")
    assert "--tp-size 2 --mem-fraction-static 0.8" in shown["Restart plan"]
    assert shown["Restarted"].startswith("stopped and started every rank on 1 node(s)")
    row = await store.run(get_experiment, store.store, outcome.experiment_id)
    assert row is not None
    state = RunState.load(row.state)
    assert state.after.snapshot_id is not None  # await_start observed the new start
    assert state.before.flags == START_FLAGS == state.plan.flags


async def test_restart_dry_run_says_what_it_would_do_and_restarts_nothing(
    tmp_path: Path, store: AsyncStore
) -> None:
    reporter = MemoryReporter()
    with faked_target(store.store) as fake:
        outcome = await engine(tmp_path, store, reporter).run(
            "restart", {"dry_run": True}, target=TARGET, actor="cli:alice"
        )
    assert outcome.status == "succeeded"
    assert outcome.summary == "dry run: the restart was planned, nothing changed on the target"
    assert fake.restarts == []
    assert texts(reporter)["Restart plan"].startswith(f"dry run: would stop every rank of {TARGET}")


async def test_restart_refuses_a_hand_edited_unit_with_its_diff_and_restarts_nothing(
    tmp_path: Path, store: AsyncStore
) -> None:
    reporter = MemoryReporter()
    with faked_target(store.store) as fake:
        fake.hand_edit = "-ExecStart=a\n+ExecStart=b"
        outcome = await engine(tmp_path, store, reporter).run("restart", {}, target=TARGET, actor="cli:alice")
    assert outcome.status == "failed"
    assert fake.restarts == []
    assert "the unit was changed by hand since flagbot last left it; `restart` would start" in (
        outcome.summary or ""
    )
    assert "+ExecStart=b" in (outcome.summary or "")


async def test_restart_takes_the_targets_lease(tmp_path: Path, store: AsyncStore) -> None:
    await store.run(
        lambda: acquire(store.store, TARGET, holder="cli:bob", host="bot-1", pid=7, purpose="try", ttl_s=600)
    )
    with faked_target(store.store) as fake, pytest.raises(LeaseHeld):
        await engine(tmp_path, store, MemoryReporter()).run("restart", {}, target=TARGET, actor="cli:alice")
    assert fake.restarts == []
