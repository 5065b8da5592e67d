"""Repository functions for benchmark results: measurement sets, their measurements, comparisons.

Kept out of store.py so that file stays the foundation's small API; the CLI, Slack and the
scheduler call these the same way (synchronously, or through `AsyncStore.run`). A set and its
measurements are written in one transaction, so a crash never leaves half a set behind.
Judging one set against another is the bench layer's (`bot.bench.compare_sets.compare_by_id`):
the store keeps the rows and imports nothing from the domain packages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, or_, select

from bot.store.models import Comparison, Measurement, MeasurementSet, Snapshot
from bot.store.store import Store

__all__ = [
    "LoadedSet",
    "UnknownMeasurementSetError",
    "add_measurements",
    "capacity_of",
    "comparisons_of",
    "get_comparison",
    "get_set",
    "latest_sets",
    "load_set",
    "save_set",
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


def add_measurements(store: Store, set_id: int, measurements: Iterable[Measurement]) -> None:
    """Append repeats to an existing set (each level as it is measured; the verdict asked for
    more), in one transaction. Nothing is read back: a benchmark appends every level, and reading
    the whole set with its snapshot each time cost more than the insert (`load_set` reads it)."""
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


def get_set(store: Store, set_id: int) -> MeasurementSet | None:
    """The set's row alone (its summary; no measurements read); None if unknown."""
    with Session(store.engine, expire_on_commit=False) as session:
        return session.get(MeasurementSet, set_id)


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


def get_comparison(store: Store, comparison_id: int) -> Comparison | None:
    """The stored comparison row; None if unknown (`bot.bench.compare_sets` reads its verdict)."""
    with Session(store.engine) as session:
        return session.get(Comparison, comparison_id)


def comparisons_of(store: Store, set_id: int) -> Sequence[Comparison]:
    """Every comparison a set took part in, on either side, newest first."""
    with Session(store.engine) as session:
        query = select(Comparison).where(
            or_(col(Comparison.reference_set_id) == set_id, col(Comparison.candidate_set_id) == set_id)
        )
        return session.exec(query.order_by(col(Comparison.id).desc())).all()
