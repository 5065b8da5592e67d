"""Measurement sets in the store and their comparisons by id (`bot.bench.compare_sets`), on SQLite
and on a real PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

from bot.bench.compare_sets import compare_by_id, load_comparison, side_of
from bot.bench.verdict import VerdictSettings
from bot.store import AsyncStore, Measurement, Snapshot, Store
from bot.store.bench_repo import (
    UnknownMeasurementSetError,
    add_measurements,
    capacity_of,
    comparisons_of,
    latest_sets,
    load_set,
    save_set,
)
from bot.store.models import MeasurementSet


@pytest.fixture
def store(empty_store: Store) -> Store:
    """A migrated store on SQLite and on PostgreSQL."""
    empty_store.upgrade()
    return empty_store


def measurements(
    speed: float, repeats: range, *, noise: tuple[float, ...] = (1.0, 1.004, 0.997)
) -> list[Measurement]:
    """The seeds' two numbers, 121 tok/s single and 1582 tok/s at 64, times speed and a little noise."""
    rows = []
    for repeat in repeats:
        f = speed * noise[repeat % len(noise)]
        for concurrency, base in ((1, 121.0), (64, 1582.0)):
            rows.append(
                Measurement(
                    target="ignored",
                    concurrency=concurrency,
                    repeat=repeat,
                    metrics={
                        "output_throughput": base * f,
                        "median_ttft_ms": 150.0 / f,
                        "median_tpot_ms": 8.0 / f,
                    },
                )
            )
    return rows


def seed_start(store: Store, slots: int) -> int:
    snapshot = store.add(
        Snapshot(
            target="sglang-qwen",
            effective={
                "max_running_requests": slots,
                "max_total_num_tokens": 1_830_000,
                "available_gpu_mem_gb": 13.3,
            },
        )
    )
    assert snapshot.id is not None
    return snapshot.id


def a_set(store: Store, label: str, slots: int, speed: float, n: int = 3) -> int:
    loaded = save_set(
        store,
        MeasurementSet(
            target="sglang-qwen", profile="quick", label=label, snapshot_id=seed_start(store, slots)
        ),
        measurements(speed, range(n)),
    )
    assert loaded.set.id is not None
    return loaded.set.id


def test_a_set_round_trips_with_its_measurements_and_capacity(store: Store) -> None:
    set_id = a_set(store, "baseline", 48, 1.0)
    loaded = load_set(store, set_id)
    assert loaded is not None
    assert loaded.set.label == "baseline" and loaded.set.created_at.tzinfo is not None
    assert [(m.concurrency, m.repeat) for m in loaded.measurements] == [
        (1, 0),
        (1, 1),
        (1, 2),
        (64, 0),
        (64, 1),
        (64, 2),
    ]
    assert {m.target for m in loaded.measurements} == {"sglang-qwen"}
    assert {m.set_id for m in loaded.measurements} == {set_id}
    assert {m.snapshot_id for m in loaded.measurements} == {loaded.set.snapshot_id}
    assert loaded.measurements[3].metrics["output_throughput"] == pytest.approx(1582.0)
    assert capacity_of(loaded)["max_running_requests"] == 48
    assert load_set(store, 999_999) is None
    assert [s.id for s in latest_sets(store, "sglang-qwen", label="baseline")] == [set_id]


def test_summary_capacity_overrides_the_snapshot(store: Store) -> None:
    loaded = save_set(
        store,
        MeasurementSet(
            target="t", snapshot_id=seed_start(store, 48), summary={"capacity": {"max_running_requests": 26}}
        ),
    )
    assert capacity_of(loaded)["max_running_requests"] == 26
    assert capacity_of(loaded)["max_total_num_tokens"] == 1_830_000


def test_compare_by_id_stores_the_seeds_verdict(store: Store) -> None:
    """Throughput "within noise", capacity 48 -> 26: regressed, guarded by max_running_requests."""
    a, b = a_set(store, "baseline", 48, 1.0), a_set(store, "fused-moe", 26, 1.002)
    compared = compare_by_id(store, a, b, VerdictSettings())
    assert compared.result.verdict == "regressed"
    assert compared.result.guarded_by == "max_running_requests"
    row = compared.row
    assert row is not None and row.id is not None
    assert (row.reference_set_id, row.candidate_set_id, row.verdict) == (a, b, "regressed")
    assert row.settings["min_effect"] == 0.03
    loaded = load_comparison(store, row.id)
    assert loaded is not None
    stored, result = loaded
    assert result == compared.result
    assert stored.guarded_by == "max_running_requests"
    assert [c.id for c in comparisons_of(store, a)] == [row.id] == [c.id for c in comparisons_of(store, b)]
    assert load_comparison(store, 999_999) is None


def test_more_repeats_are_appended_and_change_the_verdict(store: Store) -> None:
    a, b = a_set(store, "A", 48, 1.0), a_set(store, "B", 48, 0.85)
    first = compare_by_id(store, a, b, save=False)
    assert first.row is None
    assert first.result.more_repeats == 3 or first.result.verdict == "regressed"
    add_measurements(store, a, measurements(1.0, range(3, 6)))
    add_measurements(store, b, measurements(0.85, range(3, 6)))
    again = compare_by_id(store, a, b)
    assert again.result.repeats == 6
    assert again.result.verdict == "regressed"
    assert again.result.guarded_by is not None and "@c=" in again.result.guarded_by


def test_a_client_bound_set_is_not_judged_on_its_figures(store: Store) -> None:
    a = a_set(store, "A", 48, 1.0, n=6)
    loaded = save_set(
        store,
        MeasurementSet(target="sglang-qwen", client_bound=True, snapshot_id=seed_start(store, 48)),
        measurements(0.5, range(6)),
    )
    assert loaded.set.id is not None
    result = compare_by_id(store, a, loaded.set.id, save=False).result
    assert result.verdict == "undecided"
    assert result.next_action is not None and "client was the limit" in result.next_action


def test_one_client_bound_level_does_not_void_the_others(store: Store) -> None:
    a = a_set(store, "A", 48, 1.0, n=6)
    rows = measurements(0.80, range(6))
    for row in rows:
        if row.concurrency == 64:
            row.client_bound = True  # the client, not the server, limited this level only
    loaded = save_set(
        store,
        MeasurementSet(target="sglang-qwen", client_bound=True, snapshot_id=seed_start(store, 48)),
        rows,
    )
    assert loaded.set.id is not None
    side = side_of(load_set(store, loaded.set.id))
    assert side.client_bound_levels == frozenset({"c=64"})
    result = compare_by_id(store, a, loaded.set.id, save=False).result
    assert result.verdict == "regressed"  # judged at concurrency 1, where the client was fine


def test_unknown_ids_are_named(store: Store) -> None:
    a = a_set(store, "A", 48, 1.0)
    with pytest.raises(UnknownMeasurementSetError, match="no measurement set 424242"):
        compare_by_id(store, a, 424242)
    with pytest.raises(UnknownMeasurementSetError, match="no measurement set 7777"):
        add_measurements(store, 7777, [])


async def test_usable_through_the_async_store(store: Store) -> None:
    async_store = AsyncStore(store)
    try:
        a = await async_store.run(a_set, store, "A", 48, 1.0)
        b = await async_store.run(a_set, store, "B", 48, 1.0)
        results = await asyncio.gather(
            async_store.run(compare_by_id, store, a, b), async_store.run(compare_by_id, store, b, a)
        )
        assert {r.row.candidate_set_id for r in results if r.row} == {a, b}
    finally:
        await async_store.aclose()
