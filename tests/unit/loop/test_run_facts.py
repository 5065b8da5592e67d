"""The few run facts the digest reads without validating whole states: the same as a whole read."""

from __future__ import annotations

from typing import Any

import pytest

from bot.loop.run_state import (
    FACT_PATHS,
    PredictionRecord,
    RunFacts,
    RunState,
    RunStateError,
    run_facts,
    run_facts_of,
)
from tests.unit.loop.test_run_state import ISOLATE, SCHEMA_1


def _finished_try() -> dict[str, Any]:
    state = RunState.load({"schema_version": 2})
    state.before.snapshot_id, state.after.snapshot_id = 11, 12
    state.plan.reverting_experiment = 7
    state.conclusion.kept, state.conclusion.verdict = True, "improved"
    state.restart.applied = True
    state.isolate = RunState.load({"schema_version": 2, "isolate": ISOLATE}).isolate
    state.prediction = PredictionRecord(
        snapshot_id=11,
        predicted_capacity=26,
        predicted_low=25,
        predicted_high=27,
        measured_capacity=30,
        missed=True,
    )
    return state.dump()


def _failed_start() -> dict[str, Any]:
    state = RunState.load({"schema_version": 2})
    state.restart.start_failed, state.restart.rolled_back = True, True
    state.restart.fatal_line = "torch.OutOfMemoryError: CUDA out of memory"
    state.conclusion.not_started = "could not connect: node-1 refused"
    return state.dump()


STATES = {
    "a finished try (schema 2)": _finished_try(),
    "a failed start (schema 2)": _failed_start(),
    "every key of schema 1": SCHEMA_1,
    "a schema-1 failed start": {"start_failed": 1, "fatal_line": "boom", "rolled_back": "yes"},
    "a run that has not finished a step": {},
    "a fresh schema-2 state": {"schema_version": 2},
}


@pytest.mark.parametrize("stored", STATES.values(), ids=list(STATES))
def test_the_facts_equal_those_of_the_whole_state(stored: dict[str, Any]) -> None:
    assert run_facts(stored) == RunFacts.of(RunState.load(stored))


def test_the_cases_cover_every_fact() -> None:
    """Each field differs from its default in some case above, so the equality checks all of them."""
    default = RunFacts()
    read = [run_facts(stored) for stored in STATES.values()]
    for name in FACT_PATHS:
        assert any(getattr(f, name) != getattr(default, name) for f in read), name
    assert set(FACT_PATHS) == set(RunFacts.__dataclass_fields__)


def test_values_of_another_type_read_as_absent() -> None:
    odd = {
        "before_snapshot_id": "11",
        "after_snapshot_id": True,
        "reverting_experiment": 7.0,
        "kept": "yes",
        "not_started": 3,
        "start_failed": "true",
        "fatal_line": ["x"],
        "rolled_back": 1,
        "culprits": ["--a", 2, None],
        "predicted_capacity": 26.5,
        "measured_capacity": "26",
        "prediction_missed": 0,
    }
    assert run_facts_of(odd) == RunFacts(culprits=("--a",))


def test_the_paths_are_where_a_whole_read_finds_the_values() -> None:
    stored = _finished_try()
    values = {name: stored[record][field] for name, ((record, field), _) in FACT_PATHS.items()}
    assert run_facts_of(values) == run_facts(stored)


def test_a_newer_schema_is_refused_as_a_whole_read_refuses_it() -> None:
    with pytest.raises(RunStateError, match="newer flagbot"):
        run_facts({"schema_version": 3})
    with pytest.raises(RunStateError, match="newer flagbot"):
        RunState.load({"schema_version": 3})
