"""A run stored in the old shape of the step state (schema 1, the flat dict of string keys) still
resumes after the typed state (schema 2) replaced it.

`data/try_state_v1.json` was captured from main's code before the change (commit e67a91f): the
built-in `try` playbook's steps up to `propose`, run by the Engine on the fake target layer of
tests/support/loop_fake_target.py, stored what is here: the experiment's params, cursor (10: the
next step is `decide`) and state, and the rows that state names (snapshots, measurement sets, the
comparison, the hypothesis). This test stores the same, as a flagbot killed before `decide`
would have left it, and lets the new code reconcile it: it must read every old key it needs.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlmodel import SQLModel

from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter
from bot.loop.run_state import RUN_STATE_SCHEMA_VERSION, RunState, flags_from_json
from bot.store import AsyncStore, Snapshot, Store
from bot.store.checks import list_checks
from bot.store.experiments import (
    create_experiment,
    finish_step,
    get_experiment,
    start_step,
    update_experiment,
)
from bot.store.hypotheses import get_hypothesis
from bot.store.leases import acquire
from bot.store.loop_models import Hypothesis
from bot.store.models import Comparison, MeasurementSet, utcnow
from bot.store.observations import list_observations
from tests.support.loop_fake_target import TARGET, faked_target, settings

CAPTURED = Path(__file__).parent / "data" / "try_state_v1.json"
DEAD_HOLDER = "cli:alice:0dead000"
ROWS: tuple[tuple[str, type[SQLModel]], ...] = (
    ("snapshot", Snapshot),
    ("measurement_set", MeasurementSet),
    ("comparison", Comparison),
    ("hypothesis", Hypothesis),
)


def store_killed_try(store: Store, captured: dict[str, Any]) -> int:
    """The captured try as a killed flagbot leaves it: running, cursor on `decide`, state in the old
    shape, its steps up to `propose` finished, and a lease nobody heartbeats any more."""
    for key, model in ROWS:  # in a fresh store the ids come out as captured (both backends)
        for stored in captured["rows"][key]:
            row = store.add(model.model_validate({k: v for k, v in stored.items() if k != "id"}))
            assert row.id == stored["id"]  # type: ignore[attr-defined]
    row = create_experiment(
        store, target=TARGET, playbook="try", params=captured["params"], actor="cli:alice", holder=DEAD_HOLDER
    )
    assert row.id is not None
    for step in captured["steps"]:
        started = start_step(
            store, row.id, index=step["index"], name=step["name"], action=step["action"], args={}
        )
        assert started.id is not None
        finish_step(store, started.id, status=step["status"], result={}, state=captured["state"])
    update_experiment(store, row.id, status="running", hypothesis_id=captured["state"]["hypothesis_id"])
    long_ago = utcnow() - timedelta(minutes=10)
    acquire(
        store,
        TARGET,
        holder=DEAD_HOLDER,
        host="gone",
        pid=1,
        purpose="try",
        experiment_id=row.id,
        now=long_ago,
    )
    stored = get_experiment(store, row.id)
    assert stored is not None and stored.cursor == captured["cursor"] == 10
    assert "schema_version" not in stored.state  # the old shape, as main stores it
    return row.id


async def test_a_try_stored_in_the_old_shape_resumes_and_finishes_on_what_it_had_recorded(
    tmp_path: Path, store: AsyncStore
) -> None:
    captured = json.loads(CAPTURED.read_text(encoding="utf-8"))
    old = captured["state"]
    experiment_id = store_killed_try(store.store, captured)
    reporter = MemoryReporter()
    engine = Engine(settings(tmp_path), store, reporter, cache_dir=tmp_path / "cache")
    with faked_target(store.store) as target:
        target.flags = flags_from_json(old["intended_flags"])  # the target runs the experiment's change
        [outcome] = await engine.reconcile(TARGET)

    # the interrupt check compared the target with the old `intended_flags` and resumed at `decide`
    assert (outcome.status, outcome.verdict) == ("succeeded", "regressed")  # the old `verdict`
    assert outcome.summary == (
        "interrupted at step 11 and resumed (the target runs the experiment's flags and answers /health 200); "
        + old["summary"]
    )
    resumed = [(s["index"], s["action"], s["status"]) for s in outcome.steps if s["index"] >= 10]
    assert resumed == [
        (10, "decide", "ok"),
        (11, "close_hypothesis", "ok"),
        (12, "learn", "ok"),
        (13, "schedule_checks", "ok"),
    ]
    decided = next(s["result"] for s in outcome.steps if s["action"] == "decide")
    assert (
        decided["kept"] is False
        and "regressed; the target's policy on regression is 'revert'" in decided["why"]
    )

    # decide reverted to the old `before_flags`, and the node came back on them
    assert target.restarts == [flags_from_json(old["before_flags"])]
    # close_hypothesis resolved the old `hypothesis_id` by the old verdict
    hypothesis = await store.run(get_hypothesis, store.store, old["hypothesis_id"])
    assert hypothesis is not None and hypothesis.status == "confirmed"
    # learn compared the old `before_snapshot_id` (48) with the old `after_snapshot_id` (26)
    [learned] = await store.run(list_observations, store.store, flag="--enable-metrics")
    assert (
        learned.kind == "capacity-lowered"
        and learned.detail["before"] == 48
        and learned.detail["after"] == 26
    )
    # the change was not kept: the checks verify the start from before (old `before_snapshot_id`/`before_set_id`)
    checks = await store.run(list_checks, store.store, TARGET)
    assert [c.expected["snapshot_id"] for c in checks] == [old["before_snapshot_id"]] * 2
    assert {c.expected["set_id"] for c in checks} == {old["before_set_id"]}

    # the state is stored in the new shape now, the old values in their fields
    row = await store.run(get_experiment, store.store, experiment_id)
    assert row is not None and row.state["schema_version"] == RUN_STATE_SCHEMA_VERSION
    state = RunState.load(row.state)
    assert (state.before.snapshot_id, state.after.snapshot_id) == (
        old["before_snapshot_id"],
        old["after_snapshot_id"],
    )
    assert (state.before.set_id, state.after.set_id) == (old["before_set_id"], old["after_set_id"])
    assert state.plan.flags == flags_from_json(old["intended_flags"])
    assert state.restart.previous_invocations == old["previous_invocations"]
    assert state.restart.applied and state.restart.restored  # applied before the crash, reverted after
    assert state.conclusion.comparison_id == old["comparison_id"] and state.conclusion.kept is False
    assert [p.model_dump(mode="json") for p in state.conclusion.proposals] == old["proposals"]
    assert state.preflight is not None and state.preflight.report == old["preflight"]
    assert state.custom == {}  # every key main's steps wrote has its field
