"""The digest's wide reads: run-state values and a set's peak throughput computed by the database,
on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.loop.run_state import FACT_PATHS, RUN_STATE_SCHEMA_VERSION, run_facts, run_facts_of
from bot.store import Store
from bot.store.digest_reads import experiment_states, experiments_between, set_peaks_between
from bot.store.experiments import create_experiment
from bot.store.models import MeasurementSet
from tests.unit.loop.test_run_facts import STATES

START = datetime(2026, 11, 23, tzinfo=UTC)


def _seed(store: Store) -> dict[int, dict[str, Any]]:
    stored: dict[int, dict[str, Any]] = {}
    for k, state in enumerate(STATES.values()):
        row = create_experiment(
            store, target=f"t{k % 2}", playbook="try", params={"changes": []}, actor="test"
        )
        assert row.id is not None
        row.state, row.created_at = state, START + timedelta(hours=k)  # as the loop's checkpoints leave it
        store.add(row)
        stored[row.id] = state
    return stored


def test_the_extracted_values_give_the_facts_of_the_whole_state(store: Store) -> None:
    stored = _seed(store)
    rows = experiments_between(store, START, START + timedelta(days=7), None, state_paths=FACT_PATHS)
    assert [r.id for r in rows] == sorted(stored)  # oldest first
    whole = experiment_states(store, [r.id for r in rows])
    assert whole == stored
    extracted = 0
    for row in rows:
        if row.state_version == RUN_STATE_SCHEMA_VERSION:
            extracted += 1
            assert run_facts_of(row.state_values) == run_facts(stored[row.id]), row.id
        else:  # schema 1 or empty: the digest reads these whole
            assert stored[row.id].get("schema_version") is None
    assert extracted == sum(1 for s in STATES.values() if s.get("schema_version") == 2)


def test_one_target_and_the_range_bound_the_read(store: Store) -> None:
    stored = _seed(store)
    rows = experiments_between(
        store, START + timedelta(hours=1), START + timedelta(hours=4), "t1", state_paths={}
    )
    assert [r.id for r in rows] == [i for k, i in enumerate(sorted(stored)) if k in (1, 3)]
    assert all(r.state_values == {} and r.target == "t1" for r in rows)


SUMMARIES: list[tuple[dict[str, Any], float | None]] = [
    (
        {"levels": [{"output_throughput": 900.5}, {"output_throughput": 1200}, {"output_throughput": None}]},
        1200.0,
    ),
    ({"levels": [{"output_throughput": 0.1 + 0.2}, {"output_throughput": -3}]}, 0.1 + 0.2),  # the same double
    (
        {"levels": [{"output_throughput": True}, {"output_throughput": "950"}, "x", 7, []]},
        None,
    ),  # not numbers
    ({"levels": [{"request_throughput": 3.0}]}, None),
    ({"levels": {"a": {"output_throughput": 5.0}}}, None),  # levels not a list: no level
    ({"levels": None}, None),
    ({}, None),
]


def test_a_sets_peak_is_the_largest_number_among_its_levels(store: Store) -> None:
    for k, (summary, _) in enumerate(SUMMARIES):
        store.add(MeasurementSet(target="t0", created_at=START + timedelta(hours=k), summary=summary))
    store.add(MeasurementSet(target="t1", created_at=START, summary=SUMMARIES[0][0]))  # another target
    store.add(MeasurementSet(target="t0", created_at=START - timedelta(hours=1), summary=SUMMARIES[0][0]))
    peaks = set_peaks_between(store, ["t0"], START, START + timedelta(days=7), "output_throughput")
    assert [(name, at) for name, at, _ in peaks] == [
        ("t0", START + timedelta(hours=k)) for k in range(len(SUMMARIES))
    ]
    assert [peak for _, _, peak in peaks] == [expected for _, expected in SUMMARIES]


def test_a_metric_that_is_not_a_name_is_refused_before_any_sql(store: Store) -> None:
    with pytest.raises(ValueError, match="not a metric name"):
        set_peaks_between(store, ["t0"], START, START + timedelta(days=7), "x') OR 1=1 --")


def test_a_state_path_that_is_not_field_names_is_refused_before_any_sql(store: Store) -> None:
    with pytest.raises(ValueError, match="not a state path"):
        experiments_between(
            store, START, START + timedelta(days=7), None, state_paths={"x": (("plan", "a') OR 1=1 --"), int)}
        )
