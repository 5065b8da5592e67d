"""`policy.on_regression` at the `decide` step of a regressed `try` (the loop fake's verdict is
always regressed): `revert` and `ask` take the change back (`ask`'s question in the thread is not
built, so it reverts rather than keep a regression silently); `keep` keeps it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import Settings
from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter
from bot.store import AsyncStore, Store
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


def with_policy(tmp_path: Path, on_regression: str) -> Settings:
    base = settings(tmp_path)
    target = base.targets[TARGET]
    policy = target.policy.model_copy(update={"on_regression": on_regression})
    return base.model_copy(update={"targets": {TARGET: target.model_copy(update={"policy": policy})}})


@pytest.mark.parametrize(("policy", "kept"), [("revert", False), ("ask", False), ("keep", True)])
async def test_a_regressed_try_follows_the_policy_and_ask_never_keeps(
    tmp_path: Path, store: AsyncStore, policy: str, kept: bool
) -> None:
    with faked_target(store.store) as fake:
        engine = Engine(with_policy(tmp_path, policy), store, MemoryReporter(), cache_dir=tmp_path / "cache")
        outcome = await engine.run("try", {"changes": [METRICS.to_json()]}, target=TARGET, actor="cli:alice")
    [decided] = [step for step in outcome.steps if step["action"] == "decide"]
    assert decided["result"]["kept"] is kept, decided
    assert f"policy on regression is {policy!r}" in decided["result"]["why"]
    assert (fake.flags != START_FLAGS) is kept
