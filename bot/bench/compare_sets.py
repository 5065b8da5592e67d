"""Comparisons of stored measurement sets, by id: `compare_by_id(store, a, b, settings)` reads
both sets, judges B against A (`bot.bench.verdict`) and stores the verdict with the settings it
used.

Why here and not in `bot.store.bench_repo`: the store keeps rows and knows no verdicts, so it
imports nothing from the domain packages; the bench layer reads the sets through the store's
repository functions, turns them into the verdict's `Side`s, and hands the store back a plain
`Comparison` row to keep.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from bot.bench.power import PowerReached, power_reached
from bot.bench.verdict import ComparisonResult, Side, VerdictSettings, compare
from bot.store.bench_repo import LoadedSet, UnknownMeasurementSetError, capacity_of, get_comparison, load_set
from bot.store.models import Comparison
from bot.store.store import Store

__all__ = ["Compared", "compare_by_id", "load_comparison", "save_comparison", "side_of"]


@dataclass(frozen=True)
class Compared:
    """A verdict and the Comparison row it was stored as (None when not saved)."""

    result: ComparisonResult
    row: Comparison | None
    power: PowerReached | None = None
    """With `looks_on="candidate"` (a try): the power the comparison had (`bot.bench.power`)."""
    sides: tuple[Side, Side] | None = None
    sets: tuple[LoadedSet, LoadedSet] | None = None
    """The two sets as read for this verdict (reference, candidate): a caller that draws them
    (the try's chart) does not read them again."""


def side_of(loaded: LoadedSet) -> Side:
    """A set as the verdict reads it.

    Client-bound levels come from each measurement's own flag, so one saturated level (say 128)
    does not void the verdict at the others; a set flagged as a whole with no per-level flags
    (a producer that only knows the run was client-bound) marks every level.
    """
    side = Side.from_measurements(loaded.measurements, capacity=capacity_of(loaded))
    if loaded.set.client_bound and not side.client_bound_levels:
        side = Side(side.levels, side.capacity, frozenset(side.levels))
    return side


def save_comparison(
    store: Store, result: ComparisonResult, *, reference_id: int, candidate_id: int, settings: VerdictSettings
) -> Comparison:
    """Store a verdict with every cell and the settings it was reached with."""
    row = Comparison(
        reference_set_id=reference_id,
        candidate_set_id=candidate_id,
        verdict=result.verdict,
        guarded_by=result.guarded_by,
        metrics=result.to_json(),
        settings=settings.to_json(),
    )
    return store.add(row)


def load_comparison(store: Store, comparison_id: int) -> tuple[Comparison, ComparisonResult] | None:
    """The stored row and its verdict read back into objects; None if unknown."""
    row = get_comparison(store, comparison_id)
    return None if row is None else (row, ComparisonResult.from_json(row.metrics))


def compare_by_id(
    store: Store,
    reference_id: int,
    candidate_id: int,
    settings: VerdictSettings | None = None,
    *,
    save: bool = True,
    single_look: bool = False,
    looks_on: Literal["both", "candidate"] = "both",
) -> Compared:
    """Judge set `candidate_id` against set `reference_id`; store the Comparison unless `save=False`.
    `looks_on="candidate"`: the try's comparison (`compare`), with the power it reached."""
    settings = settings or VerdictSettings()
    loaded = []
    for set_id in (reference_id, candidate_id):
        found = load_set(store, set_id)
        if found is None:
            raise UnknownMeasurementSetError(f"no measurement set {set_id}")
        loaded.append(found)
    reference, candidate = side_of(loaded[0]), side_of(loaded[1])
    result = compare(reference, candidate, settings, single_look=single_look, looks_on=looks_on)
    reached = power_reached(reference, candidate, result, settings) if looks_on == "candidate" else None
    if reached is not None:
        result = replace(result, notes=(*result.notes, reached.describe()))
    row = (
        save_comparison(
            store, result, reference_id=reference_id, candidate_id=candidate_id, settings=settings
        )
        if save
        else None
    )
    return Compared(result, row, reached, (reference, candidate), (loaded[0], loaded[1]))
