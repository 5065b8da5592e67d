"""Repository functions for benchmark results: measurement sets, their measurements, comparisons.

Kept out of store.py so that file stays the foundation's small API; the CLI, Slack and the
scheduler call these the same way (synchronously, or through `AsyncStore.run`). A set and its
measurements are written in one transaction, so a crash never leaves half a set behind.
Comparisons are by id: `compare_by_id(store, a, b, settings)` reads both sets, judges B against
A (`bot.bench.verdict`) and stores the verdict with the settings it used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, or_, select

from bot.bench.verdict import ComparisonResult, Side, VerdictSettings, compare
from bot.store.models import Comparison, Measurement, MeasurementSet, Snapshot
from bot.store.store import Store

__all__ = [
    "Compared",
    "LoadedSet",
    "UnknownMeasurementSetError",
    "add_measurements",
    "capacity_of",
    "compare_by_id",
    "comparisons_of",
    "latest_sets",
    "load_comparison",
    "load_set",
    "save_comparison",
    "save_set",
    "side_of",
]

CAPACITY_KEYS = ("max_running_requests", "max_total_num_tokens", "available_gpu_mem_gb")


class UnknownMeasurementSetError(LookupError):
    """No measurement set has this id; the message names it."""


@dataclass(frozen=True)
class LoadedSet:
    """A measurement set with its measurements (by level, then repeat) and its start's snapshot."""

    set: MeasurementSet
    measurements: tuple[Measurement, ...]
    snapshot: Snapshot | None = None


@dataclass(frozen=True)
class Compared:
    """A verdict and the Comparison row it was stored as (None when not saved)."""

    result: ComparisonResult
    row: Comparison | None


def save_set(
    store: Store, measurement_set: MeasurementSet, measurements: Iterable[Measurement] = ()
) -> LoadedSet:
    """Insert a set and its measurements together; each measurement gets the set's id and target."""
    with Session(store.engine, expire_on_commit=False) as session:
        session.add(measurement_set)
        session.flush()
        rows = []
        for m in measurements:
            m.set_id, m.target = measurement_set.id, measurement_set.target
            m.snapshot_id = m.snapshot_id if m.snapshot_id is not None else measurement_set.snapshot_id
            m.profile = m.profile or measurement_set.profile
            session.add(m)
            rows.append(m)
        session.commit()
        for row in (measurement_set, *rows):
            session.refresh(row)
    assert measurement_set.id is not None
    loaded = load_set(store, measurement_set.id)
    assert loaded is not None
    return loaded


def add_measurements(store: Store, set_id: int, measurements: Iterable[Measurement]) -> LoadedSet:
    """Append repeats to an existing set (the verdict asked for more), in one transaction."""
    with Session(store.engine, expire_on_commit=False) as session:
        owner = session.get(MeasurementSet, set_id)
        if owner is None:
            raise UnknownMeasurementSetError(f"no measurement set {set_id}")
        for m in measurements:
            m.set_id, m.target = set_id, owner.target
            m.snapshot_id = m.snapshot_id if m.snapshot_id is not None else owner.snapshot_id
            m.profile = m.profile or owner.profile
            session.add(m)
        session.commit()
    loaded = load_set(store, set_id)
    assert loaded is not None
    return loaded


def load_set(store: Store, set_id: int) -> LoadedSet | None:
    """The set with its measurements ordered by concurrency, rate and repeat; None if unknown."""
    with Session(store.engine, expire_on_commit=False) as session:
        found = session.get(MeasurementSet, set_id)
        if found is None:
            return None
        query = (
            select(Measurement)
            .where(Measurement.set_id == set_id)
            .order_by(
                col(Measurement.concurrency),
                col(Measurement.request_rate),
                col(Measurement.repeat),
                col(Measurement.id),
            )
        )
        rows = tuple(session.exec(query).all())
        snapshot = session.get(Snapshot, found.snapshot_id) if found.snapshot_id is not None else None
        return LoadedSet(found, rows, snapshot)


def latest_sets(
    store: Store, target: str, *, label: str | None = None, limit: int = 20
) -> Sequence[MeasurementSet]:
    """The newest sets of a target (optionally with one label), newest first."""
    with Session(store.engine) as session:
        query = select(MeasurementSet).where(MeasurementSet.target == target)
        if label is not None:
            query = query.where(MeasurementSet.label == label)
        return session.exec(query.order_by(col(MeasurementSet.id).desc()).limit(limit)).all()


def capacity_of(loaded: LoadedSet) -> dict[str, Any]:
    """Capacity values of a set's start: the snapshot's effective values, overridden by
    `summary["capacity"]` when the runner recorded them there (e.g. from /server_info)."""
    values: dict[str, Any] = {}
    if loaded.snapshot is not None:
        values.update(
            {k: loaded.snapshot.effective[k] for k in CAPACITY_KEYS if k in loaded.snapshot.effective}
        )
    recorded = loaded.set.summary.get("capacity")
    if isinstance(recorded, dict):
        values.update({k: v for k, v in recorded.items() if v is not None})
    return values


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
    with Session(store.engine) as session:
        row = session.get(Comparison, comparison_id)
        return None if row is None else (row, ComparisonResult.from_json(row.metrics))


def comparisons_of(store: Store, set_id: int) -> Sequence[Comparison]:
    """Every comparison a set took part in, on either side, newest first."""
    with Session(store.engine) as session:
        query = select(Comparison).where(
            or_(col(Comparison.reference_set_id) == set_id, col(Comparison.candidate_set_id) == set_id)
        )
        return session.exec(query.order_by(col(Comparison.id).desc())).all()


def compare_by_id(
    store: Store,
    reference_id: int,
    candidate_id: int,
    settings: VerdictSettings | None = None,
    *,
    save: bool = True,
    single_look: bool = False,
) -> Compared:
    """Judge set `candidate_id` against set `reference_id`; store the Comparison unless `save=False`."""
    settings = settings or VerdictSettings()
    loaded = []
    for set_id in (reference_id, candidate_id):
        found = load_set(store, set_id)
        if found is None:
            raise UnknownMeasurementSetError(f"no measurement set {set_id}")
        loaded.append(found)
    result = compare(side_of(loaded[0]), side_of(loaded[1]), settings, single_look=single_look)
    row = (
        save_comparison(
            store, result, reference_id=reference_id, candidate_id=candidate_id, settings=settings
        )
        if save
        else None
    )
    return Compared(result, row)
