"""`policy.on_regression` at the `decide` step of a regressed `try` (the loop fake's verdict is
always regressed): `revert` takes the change back, `keep` keeps it, `ask` leaves it applied with
the decision pending (a deadline and the default action in the run state) and the run finished."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bot.app.decisions import decision_pending, next_actions
from bot.config import Settings
from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter
from bot.loop.run_state import RunState
from bot.store import AsyncStore, Store
from bot.store.experiments import get_experiment
from bot.store.leases import current
from bot.store.models import utcnow
from bot.target.evidence import VerdictBlock
from tests.component.loop.test_playbooks_cite_measurements import METRICS
from tests.support.loop_fake_target import START_FLAGS, TARGET, faked_target, settings


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    wrapped = AsyncStore(opened)
    yield wrapped
    await wrapped.aclose()
    opened.close()


def with_policy(tmp_path: Path, on_regression: str, **more: object) -> Settings:
    base = settings(tmp_path)
    target = base.targets[TARGET]
    policy = target.policy.model_copy(update={"on_regression": on_regression, **more})
    return base.model_copy(update={"targets": {TARGET: target.model_copy(update={"policy": policy})}})


@pytest.mark.parametrize(("policy", "kept"), [("revert", False), ("keep", True)])
async def test_a_regressed_try_follows_the_policy(
    tmp_path: Path, store: AsyncStore, policy: str, kept: bool
) -> None:
    with faked_target(store.store) as fake:
        engine = Engine(with_policy(tmp_path, policy), store, MemoryReporter(), cache_dir=tmp_path / "cache")
        outcome = await engine.run("try", {"changes": [METRICS.to_json()]}, target=TARGET, actor="cli:alice")
    [decided] = [step for step in outcome.steps if step["action"] == "decide"]
    assert decided["result"]["kept"] is kept, decided
    assert f"policy on regression is {policy!r}" in decided["result"]["why"]
    assert (fake.flags != START_FLAGS) is kept


async def test_ask_leaves_the_change_applied_and_the_decision_pending(
    tmp_path: Path, store: AsyncStore
) -> None:
    reporter = MemoryReporter()
    config = with_policy(tmp_path, "ask", ask_timeout=timedelta(minutes=45), ask_default="keep")
    with faked_target(store.store) as fake:
        engine = Engine(config, store, reporter, cache_dir=tmp_path / "cache")
        before = utcnow()
        outcome = await engine.run("try", {"changes": [METRICS.to_json()]}, target=TARGET, actor="cli:alice")
        after = utcnow()
    [decided] = [step for step in outcome.steps if step["action"] == "decide"]
    assert decided["result"]["kept"] is None, decided
    assert fake.flags != START_FLAGS  # nothing reverted
    row = await store.run(get_experiment, store.store, outcome.experiment_id)
    assert row is not None and row.status == "succeeded" and row.verdict == "regressed"
    assert decision_pending(row)
    conclusion = RunState.load(row.state).conclusion
    assert conclusion.kept is None and conclusion.ask_default == "keep"
    deadline = datetime.fromisoformat(str(conclusion.ask_deadline))
    assert before + timedelta(minutes=45) <= deadline <= after + timedelta(minutes=45)
    assert await store.run(current, store.store, TARGET) is None  # the run let go of the target
    said = [block.headline for block, _ in reporter.blocks if isinstance(block, VerdictBlock)]
    assert any(f"If nobody answers by {deadline:%H:%M} UTC, flagbot will keep" in text for text in said), said
    assert next_actions(row).actions[:2] == ("revert", "keep") and next_actions(row).primary == "revert"
