"""The `plan_revert` step refuses an experiment of another target (defence in depth behind the
application layer's check): its flags are never planned, so never written, on this target."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bot.loop.actions import StepContext
from bot.loop.report import MemoryReporter
from bot.loop.run_state import RunState
from bot.loop.steps import state_steps
from bot.sglang.flagset import FlagItem, FlagSet
from bot.store import AsyncStore
from bot.store.experiments import create_experiment, update_experiment
from tests.support.schedule import migrated_store, settings

RUNNING = FlagSet((FlagItem("--enable-metrics", None),))


@pytest.fixture
async def astore(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    store = AsyncStore(migrated_store("sqlite", tmp_path))
    yield store
    await store.aclose()


def kept_try(astore: AsyncStore, target: str) -> int:
    row = create_experiment(
        astore.store,
        target=target,
        playbook="try",
        params={"changes": [{"op": "add", "flag": "--enable-metrics"}]},
        actor="slack:U1",
    )
    assert row.id is not None
    state = RunState()
    state.conclusion.kept = True
    state.before.flags = FlagSet(())
    update_experiment(astore.store, row.id, status="succeeded", state=state.dump())
    return row.id


def context(astore: AsyncStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StepContext:
    async def read_unit(node: Any) -> SimpleNamespace:  # the unit lab's node 0 runs
        return SimpleNamespace(flags=RUNNING, env={})

    monkeypatch.setattr(state_steps, "read_unit", read_unit)
    revert = create_experiment(astore.store, target="lab", playbook="revert", params={}, actor="slack:U1")
    assert revert.id is not None
    return StepContext(
        experiment_id=revert.id,
        target="lab",
        ts=SimpleNamespace(node0=None),  # type: ignore[arg-type]
        store=astore,
        settings=settings(tmp_path),
        params={},
        state=RunState(),
        reporter=MemoryReporter(),
        actor="slack:U1",
        cache_dir=tmp_path / "cache",
        playbook="revert",
    )


async def test_an_experiment_of_another_target_is_refused_and_nothing_is_planned(
    astore: AsyncStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = context(astore, tmp_path, monkeypatch)
    prod = kept_try(astore, "prod")
    with pytest.raises(ValueError, match=rf"experiment #{prod} ran on target prod, not lab") as refused:
        await state_steps.plan_revert(ctx, what=str(prod))
    assert f"`revert {prod} target=prod`" in str(refused.value)
    assert ctx.state.plan.flags is None and ctx.state.plan.reverting_experiment is None


async def test_an_experiment_of_this_target_is_planned(
    astore: AsyncStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = context(astore, tmp_path, monkeypatch)
    lab = kept_try(astore, "lab")
    planned = await state_steps.plan_revert(ctx, what=str(lab))
    assert planned["flags"] == [] and ctx.state.plan.reverting_experiment == lab
