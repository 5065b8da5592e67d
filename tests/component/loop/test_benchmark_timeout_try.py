"""`timeouts.benchmark` in a playbook: a `try` whose after-side benchmark outlives the bound fails
with the setting named and rolls back to the flags it started from, as for any failed step. The
after side runs the real `run_plan` (bench_serving backend) against a node whose benchmark never
ends; the rest is the loop fake of tests/support/loop_fake_target.py on a real store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.bench.run import BenchPlan, run_plan
from bot.config.schema import BenchProfile, BenchServingCommand
from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter
from bot.loop.steps import measure_steps
from bot.sglang.change import Change
from bot.store import AsyncStore, Store
from tests.support.loop_fake_target import START_FLAGS, TARGET, faked_target, settings
from tests.unit.bench.test_benchmark_timeout import HangingNode

BOUND_S = 0.05


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    wrapped = AsyncStore(opened)
    yield wrapped
    await wrapped.aclose()
    opened.close()


async def test_a_try_whose_benchmark_exceeds_the_bound_fails_and_rolls_back(
    tmp_path: Path, store: AsyncStore
) -> None:
    node = HangingNode()
    with faked_target(store.store) as fake:
        measured = fake.run_plan
        calls: list[str] = []

        async def before_fine_after_hangs(plan: Any, **kwargs: Any) -> Any:
            calls.append(plan.label)
            if plan.label != "after":  # the start's side measures as the fake does
                return await measured(plan, **kwargs)
            real = BenchPlan.build(
                target=TARGET,
                base_url="http://127.0.0.1:9",
                profile_name=plan.profile_name,
                profile=BenchProfile(concurrency=[4], repeats=1, num_requests=8, backend="bench_serving"),
                bench_serving=BenchServingCommand(module="sglang.bench_serving"),
                timeout_s=BOUND_S,
            )
            return await run_plan(real, node=node)

        measure_steps.run_plan = before_fine_after_hangs  # type: ignore[assignment]  # faked_target restores it
        engine = Engine(settings(tmp_path), store, MemoryReporter(), cache_dir=tmp_path / "cache")
        outcome = await engine.run(
            "try",
            {"changes": [Change("set", "--mem-fraction-static", "0.85").to_json()]},
            target=TARGET,
            actor="cli:alice",
        )
    assert calls[-1] == "after" and node.cancelled
    assert outcome.status == "rolled-back", outcome
    assert f"benchmark exceeded timeouts.benchmark ({BOUND_S:g} s)" in (outcome.summary or "")
    assert fake.restarts[0] != START_FLAGS and fake.restarts[-1] == START_FLAGS  # rolled back
    assert fake.flags == START_FLAGS
