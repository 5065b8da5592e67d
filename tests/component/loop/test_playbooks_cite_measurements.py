"""Every built-in playbook's verdict names the measurements it rests on: the run's conclusion cites
stored snapshots (and measurement sets where it benchmarked), each of which exists in the store,
and the verdict's evidence says "rests on ...". Run on the fake target layer
(tests/support/loop_fake_target.py) with the real steps and store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter, RunOutcome
from bot.loop.run_state import RunState
from bot.loop.steps import analysis_steps, state_steps
from bot.sglang.change import Change
from bot.store import AsyncStore, Store
from bot.store.bench_repo import load_set
from bot.store.experiments import get_experiment
from bot.store.snapshots import get_snapshot
from bot.target.evidence import TextBlock, VerdictBlock
from tests.support.loop_fake_target import TARGET, FakeTarget, faked_target, settings

BUILTIN = Path(__file__).parents[3] / "bot" / "playbooks"
METRICS = Change("add", "--enable-metrics")
SAME_CAPACITY = Change("set", "--mem-fraction-static", "0.85")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    astore = AsyncStore(opened)
    yield astore
    astore._executor.shutdown(wait=True)
    opened.close()


@contextmanager
def fake_everywhere(store: AsyncStore) -> Iterator[FakeTarget]:
    """The loop fake, plus the target functions verify's, revert's and isolate's steps import."""
    with faked_target(store.store) as fake:
        swaps = [
            (state_steps, "observe", fake.observe),
            (state_steps, "read_unit", fake.read_unit),
            (analysis_steps, "read_unit", fake.read_unit),
            (analysis_steps, "apply_and_restart", fake.apply_and_restart),
            (analysis_steps, "ensure_ready", fake.ensure_ready),
            (analysis_steps, "run_plan", fake.run_plan),
        ]
        saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
        for module, name, value in swaps:
            setattr(module, name, value)
        try:
            yield fake
        finally:
            for module, name, value in saved:
                setattr(module, name, value)


async def cited(store: AsyncStore, outcome: RunOutcome) -> RunState:
    """The run's state, after checking that every measurement its conclusion cites is stored."""
    row = await store.run(get_experiment, store.store, outcome.experiment_id)
    assert row is not None
    state = RunState.load(row.state)
    conclusion = state.conclusion
    assert conclusion.verdict is not None
    assert conclusion.snapshot_ids, f"{outcome.playbook}: verdict {conclusion.verdict} cites no snapshot"
    for snapshot_id in conclusion.snapshot_ids:
        assert await store.run(get_snapshot, store.store, snapshot_id) is not None, snapshot_id
    for set_id in conclusion.set_ids:
        assert await store.run(load_set, store.store, set_id) is not None, set_id
    return state


def says_rests_on(reporter: MemoryReporter, experiment_id: int, state: RunState) -> None:
    shown = [
        line
        for block, run in reporter.blocks
        if run == experiment_id
        for line in (
            block.details
            if isinstance(block, VerdictBlock)
            else (block.text,)
            if isinstance(block, TextBlock)
            else ()
        )
        if line.startswith("rests on") or "(rests on" in line
    ]
    assert shown, f"experiment #{experiment_id}: no evidence names what the verdict rests on"
    assert all(f"snapshot #{i}" in shown[-1] for i in state.conclusion.snapshot_ids)


class Walk:
    def __init__(self, tmp_path: Path, store: AsyncStore) -> None:
        self.store = store
        self.reporter = MemoryReporter()
        self.engine = Engine(settings(tmp_path), store, self.reporter, cache_dir=tmp_path / "cache")
        self.runs: dict[str, tuple[RunOutcome, RunState]] = {}

    async def run(self, playbook: str, params: dict[str, Any]) -> RunState:
        outcome = await self.engine.run(playbook, params, target=TARGET, actor="cli:alice")
        assert outcome.status == "succeeded", outcome.summary
        state = await cited(self.store, outcome)
        self.runs[playbook] = (outcome, state)
        return state


async def test_each_builtin_playbook_verdict_cites_stored_measurements(
    tmp_path: Path, store: AsyncStore
) -> None:
    walk = Walk(tmp_path, store)
    with fake_everywhere(store):
        pinned = await walk.run("baseline", {})
        assert pinned.conclusion.set_ids == [pinned.after.set_id]
        tried = await walk.run(
            "try",
            {"changes": [SAME_CAPACITY.to_json()], "expect": ["output_throughput>=-2%"], "keep": "always"},
        )
        assert set(tried.conclusion.set_ids) == {tried.before.set_id, tried.after.set_id}
        verified = await walk.run("verify", {"expect": ["output_throughput>=-2%"]})
        assert verified.conclusion.set_ids == [verified.after.set_id, pinned.after.set_id]
        reverted = await walk.run("revert", {})
        assert reverted.conclusion.snapshot_ids == [
            reverted.reference.snapshot_id,
            reverted.after.snapshot_id,
        ]
    books = {path.stem for path in BUILTIN.glob("*.yaml")}
    # isolate: below; restart judges nothing (no verdict to cite): tests/component/loop/test_restart_command.py
    assert books == set(walk.runs) | {"isolate", "restart"}, "a built-in playbook this test does not walk"
    for outcome, state in walk.runs.values():
        says_rests_on(walk.reporter, outcome.experiment_id, state)


async def test_isolate_verdict_cites_the_measurements_it_rests_on(tmp_path: Path, store: AsyncStore) -> None:
    walk = Walk(tmp_path, store)
    with fake_everywhere(store):
        await walk.run("baseline", {})
        await walk.run("try", {"changes": [METRICS.to_json()], "keep": "always"})
        await walk.run("isolate", {"expect": ["max_running_requests>=48"]})
