"""The capacity prediction in the try loop, played on the seed story (issue 23, items 2 to 4).

The built-in `try` runs on the fake target layer (tests/support/loop_fake_target.py) whose starts
are the twin's seed-gb10 starts (the engine in-process, its lines parsed and stored as `observe`
stores them: tests/support/twin_start.py). `--enable-fused-moe-sum-all-reduce` takes a workspace
while the model loads: effective max_running_requests 48 -> 26. The model does not compute that
flag, so the first try cannot predict it and restarts; its two starts measure the workspace, the
knowledge base keeps it, and trying the flag again with `max_running_requests>=48` is stopped
before any restart. `force=yes` goes ahead, and its prediction is scored against the start.
The store is the loop's conftest one: SQLite and PostgreSQL (the digest's JSON reads differ).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from pathlib import Path

import pytest

from bot.commands import parse_command
from bot.digest.build import build_digest
from bot.digest.markdown import render_markdown
from bot.digest.week import IsoWeek, zone
from bot.loop.capacity import (
    MEMORY_COST,
    PREDICTION_MISSED,
    cost_detail,
    figures_of,
    identity_of,
    predict_for_target,
)
from bot.loop.engine import Engine
from bot.loop.records_view import read
from bot.loop.report import MemoryReporter
from bot.loop.run_state import RunState
from bot.sglang.capacity_model.arithmetic import learn_flag_cost
from bot.sglang.capacity_model.figures import Band, Unknown
from bot.sglang.change import Change
from bot.sglang.expectation import parse_expectation
from bot.sglang.flagset import FlagSet
from bot.store import AsyncStore, Snapshot, Store
from bot.store.experiments import get_experiment
from bot.store.observations import add_observation, list_observations
from bot.store.records import evidence_of
from tests.support.loop_fake_target import TARGET, faked_target, settings
from tests.support.twin_start import twin_scenario, twin_snapshot

FUSED_MOE = Change("add", "--enable-fused-moe-sum-all-reduce")
EXPECT = "max_running_requests>=48"


async def state_of(store: AsyncStore, experiment_id: int) -> RunState:
    row = await store.run(get_experiment, store.store, experiment_id)
    assert row is not None
    return RunState.load(row.state)


def seed_gb10_starts() -> Callable[[FlagSet, int], Snapshot]:
    scenario = twin_scenario("seed-gb10")

    def start(flags: FlagSet, invocation: int) -> Snapshot:
        return twin_snapshot(TARGET, scenario, flags.argv(), seed=invocation)

    return start


async def test_the_second_fused_moe_try_is_stopped_before_any_restart_and_force_goes_ahead(
    store: AsyncStore, tmp_path: Path
) -> None:
    engine = Engine(settings(tmp_path), store, MemoryReporter(), cache_dir=tmp_path / "cache")
    params = {"changes": [FUSED_MOE.to_json()], "expect": [EXPECT]}
    with faked_target(store.store) as fake:
        fake.flags = FlagSet(())
        fake.start_of = seed_gb10_starts()
        first = await engine.run("try", params, target=TARGET, actor="cli:t")
        restarts_after_first = len(fake.restarts)
        second = await engine.run("try", params, target=TARGET, actor="cli:t")
        dry = await engine.run("try", {**params, "dry_run": True}, target=TARGET, actor="cli:t")
        restarts_after_second = len(fake.restarts)
        forced = await engine.run("try", {**params, "force": True}, target=TARGET, actor="cli:t")
        flags_after_forced = fake.restarts[restarts_after_second]

    # the first try could not predict the flag (not modelled, nothing learned): it restarted,
    # measured 26, and its two starts measured the workspace (the twin's is 9.24 GiB)
    assert restarts_after_first >= 1
    first_state = await state_of(store, first.experiment_id)
    assert first_state.prediction is not None
    assert first_state.prediction.predicted_capacity is None
    assert first_state.prediction.measured_capacity == 26
    costs = {
        o.experiment_id: o for o in await store.run(list_observations, store.store) if o.kind == MEMORY_COST
    }
    learned = costs[first.experiment_id]
    assert learned.flag == FUSED_MOE.flag
    assert learned.gpu_name == "NVIDIA GB10"
    assert learned.detail["workspace_gib"] == pytest.approx(9.24, abs=0.1)

    # the second try: predicted 26 from the learned workspace, stopped before any restart
    assert second.status == "failed"
    assert restarts_after_second == restarts_after_first
    assert "predicted to fail before any restart" in (second.summary or "")
    assert EXPECT in (second.summary or "")
    assert f"knowledge fact #{learned.id}" in (second.summary or "")
    assert "force=yes" in (second.summary or "")
    second_state = await state_of(store, second.experiment_id)
    assert second_state.prediction is not None
    assert second_state.prediction.predicted_capacity == 26
    assert second_state.restart.applied is False
    shown = [e.title for e in await store.run(evidence_of, store.store, second.experiment_id)]
    assert any(title.startswith("Predicted capacity (from the start of snapshot #") for title in shown)

    # a dry run shows the same prediction and ends as a dry run, without a stop or a restart
    assert dry.status == "succeeded"
    dry_state = await state_of(store, dry.experiment_id)
    assert dry_state.prediction is not None
    assert (dry_state.prediction.predicted_capacity, dry_state.prediction.stopped) == (26, None)

    # force=yes: the same try restarts, and its prediction is scored against the start it made
    assert any(item.flag == FUSED_MOE.flag for item in flags_after_forced.items)
    forced_state = await state_of(store, forced.experiment_id)
    assert forced_state.prediction is not None
    assert forced_state.prediction.forced is True
    assert forced_state.prediction.measured_capacity == 26
    assert forced_state.prediction.missed is False
    # the forced try measured the workspace again (the stopped one restarted nothing, learned nothing)
    assert set(costs) == {first.experiment_id, forced.experiment_id}


async def test_log_and_the_digest_show_the_prediction_error_and_a_miss_is_a_finding(
    store: AsyncStore, tmp_path: Path
) -> None:
    """Three tries of the flag: no prediction (no start observed yet), then predicted 26 and
    measured 26 (force=yes), then a start that (by a changed twin) keeps 48: a miss."""
    config = settings(tmp_path)
    engine = Engine(config, store, MemoryReporter(), cache_dir=tmp_path / "cache")
    params = {"changes": [FUSED_MOE.to_json()], "expect": [EXPECT], "force": True}
    starts = seed_gb10_starts()
    with faked_target(store.store) as fake:
        fake.flags = FlagSet(())
        fake.start_of = starts
        first = await engine.run("try", params, target=TARGET, actor="cli:t")
        scored = await engine.run("try", params, target=TARGET, actor="cli:t")
        fake.start_of = lambda flags, invocation: starts(
            FlagSet(()), invocation
        )  # the flag costs nothing now
        missed = await engine.run("try", params, target=TARGET, actor="cli:t")

    answer = await store.run(read, store.store, parse_command("log"), TARGET, actor="cli:t")
    table = next(t for t in answer["tables"] if t["title"].startswith("Capacity predicted before each try"))
    rows = {row[1]: row for row in table["rows"]}
    assert rows[f"#{first.experiment_id}"][2:] == ["unknown", "26", "-", "-"]  # no start to predict from
    assert rows[f"#{scored.experiment_id}"][3:] == ["26", "+0", "no"]
    assert rows[f"#{scored.experiment_id}"][2].startswith("26")
    assert rows[f"#{missed.experiment_id}"][3:] == ["48", "+22", "yes"]
    story = " ".join(row[3] for row in answer["tables"][0]["rows"])
    assert "measured 48 (error +22, missed: outside the band)" in story

    findings = [o for o in await store.run(list_observations, store.store) if o.kind == PREDICTION_MISSED]
    assert [o.experiment_id for o in findings] == [missed.experiment_id]
    assert "max_running_requests: predicted 26" in findings[0].text
    assert "measured 48" in findings[0].text

    row = await store.run(get_experiment, store.store, missed.experiment_id)
    assert row is not None
    created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
    digest = await store.run(
        build_digest, store.store, config, IsoWeek.containing(created, zone(config.schedules.timezone))
    )
    assert [(p.experiment_id, p.error, p.missed) for p in digest.predictions][1:] == [
        (scored.experiment_id, 0, False),
        (missed.experiment_id, 22, True),
    ]
    markdown = render_markdown(digest)
    assert "## Capacity predicted before the restart (1 missed)" in markdown
    assert "measured 48 (error +22, missed: outside the band)" in markdown
    assert any(item.kind == PREDICTION_MISSED for item in digest.learned)


def test_a_workspace_learned_on_one_target_predicts_another_with_the_same_model_and_gpu(
    sync_store: Store,
) -> None:
    """A second target (its own starts, never tried with the flag) is predicted from the fact
    the first target's try wrote; a third on another GPU is not (unknown: needs a restart)."""
    scenario = twin_scenario("seed-gb10")
    gb10 = {
        "node0": [{"name": "NVIDIA GB10", "compute_cap": "12.1", "memory.total": scenario.gpu.memory_mib}]
    }
    for target, gpus in (
        ("seeds-b", gb10),
        ("h200", {"node0": [{**gb10["node0"][0], "name": "NVIDIA H200"}]}),
    ):
        start = twin_snapshot(target, scenario, seed=5)
        start.effective = {**start.effective, "gpus": gpus}
        sync_store.add(start)
    before = twin_snapshot(TARGET, scenario, seed=1)
    before.effective = {**before.effective, "gpus": gb10}
    after = twin_snapshot(TARGET, scenario, [FUSED_MOE.flag or ""], seed=2)
    identity = identity_of(before)
    workspace = learn_flag_cost(figures_of(before), figures_of(after))
    assert not isinstance(workspace, Unknown)
    fact = add_observation(
        sync_store,
        flag=FUSED_MOE.flag or "",
        kind=MEMORY_COST,
        text="measured",
        target=TARGET,
        gpu_name="NVIDIA GB10",
        sglang_version=scenario.sglang_version,
        detail=cost_detail(identity, workspace, 1, 2),
    )

    found = predict_for_target(sync_store, "seeds-b", [FUSED_MOE], [parse_expectation(EXPECT)])
    assert found is not None
    predicted = found.prediction.figure("max_running_requests").predicted
    assert isinstance(predicted, Band)
    assert predicted.value == 26
    assert found.confident_failures
    step = next(s for s in found.prediction.steps if s.name == f"workspace of {FUSED_MOE.flag}")
    assert step.source == (
        f"knowledge fact #{fact.id}: measured on {TARGET} "
        f"(/shared/models/Qwen3.5-122B-A10B on NVIDIA GB10 (tp 2), SGLang {scenario.sglang_version})"
    )

    elsewhere = predict_for_target(sync_store, "h200", [FUSED_MOE], [parse_expectation(EXPECT)])
    assert elsewhere is not None
    assert elsewhere.prediction.unknown == f"the memory effect of {FUSED_MOE.flag} is not modelled"
