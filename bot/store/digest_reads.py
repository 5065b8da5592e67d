"""The wide reads the weekly digest is built from: each table read once for a week's range
(`[start, end)` in UTC), every target at once.

Why not the per-target helpers: the digest must stay fast for a week of 10,000 experiments
(bench/digest_scale.py), so it reads whole ranges (and `IN (...)` lists cut in `chunks`) and
groups the rows itself (`bot.digest.build`). Nothing here writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import ColumnElement, Float, String, literal_column
from sqlmodel import Session, col, select

from bot.store.loop_models import (
    AuditEvent,
    Baseline,
    Experiment,
    Hypothesis,
    Investigation,
    KnowledgeObservation,
)
from bot.store.models import MeasurementSet, Snapshot
from bot.store.store import Store

__all__ = [
    "CHUNK",
    "StatePaths",
    "WeekExperiment",
    "audit_events_of",
    "baseline_at",
    "chunks",
    "effective_before",
    "experiment_states",
    "experiments_between",
    "hypotheses_of_week",
    "investigations_by_id",
    "latest_snapshot_before",
    "observations_between",
    "set_peaks_between",
    "snapshot_effectives",
    "snapshot_effectives_between",
    "snapshot_targets_between",
    "stored_targets",
]

CHUNK = 500
"""Ids per `IN (...)`: well under SQLite's and PostgreSQL's bound-parameter limits."""

T = TypeVar("T")


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _between(
    store: Store, model: Any, column: Any, start: datetime, end: datetime, target: str | None
) -> list[Any]:
    query = select(model).where(col(column) >= start, col(column) < end)
    if target is not None:
        query = query.where(model.target == target)
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query.order_by(col(column), col(model.id))).all())


class WeekExperiment(NamedTuple):
    """The columns of an experiment the digest reads, as a plain row: a week can hold 100,000, and
    building an ORM object per row (identity map, instrumented attributes) cost more than reading it.

    Of the run state only its `schema_version` and the values at the paths the caller asked for
    (`state_values`, by name; absent: None) are read: decoding every whole state (its preflight
    report, proposals, summaries) was most of a large week's cost."""

    id: int
    target: str
    playbook: str
    params: Mapping[str, Any]
    status: str
    verdict: str | None
    summary: str | None
    actor: str
    created_at: datetime
    investigation_id: int | None
    before_snapshot_id: int | None
    after_snapshot_id: int | None
    state_version: int | None
    state_values: Mapping[str, object]


StatePaths = Mapping[str, tuple[tuple[str, str], type]]
"""name -> (path in the state's JSON, the JSON type there: int, bool, str, or list)."""

_COLUMNS = tuple(getattr(Experiment, name) for name in WeekExperiment._fields[:-2])
PATH_PART = re.compile(r"[a-z][a-z0-9_]*")
"""One step of a state path: a field name, nothing else (paths are written into the SQL)."""


def _values_array(paths: Sequence[tuple[str, ...]], dialect: str) -> ColumnElement[str]:
    """The values at `paths` of `experiment.state`, as the text of one JSON array, extracted by the
    database: SQLite's multi-path `json_extract`, PostgreSQL's `json_build_array` of `#>`.

    Why one array and not a column per path: on a week of 10,000 states of 2.5 kB (SQLite 3.40,
    bench/digest_scale.py's rows) fifteen `json_extract` columns took the database 0.17 s and
    one multi-path call 0.12 s, and every typed column cost SQLAlchemy a result processor per
    row; one array is one small `json.loads` here."""
    for path in paths:
        if not all(PATH_PART.fullmatch(part) for part in path):
            raise ValueError(f"not a state path: {path!r}")
    table = Experiment.__tablename__
    if dialect == "postgresql":
        parts = ", ".join(f"{table}.state #> '{{{','.join(path)}}}'" for path in paths)
        sql = f"CAST(json_build_array({parts}) AS TEXT)"
    else:
        # Given one path, SQLite answers with that value, not an array of it: ask for it twice.
        literals = ", ".join(
            "'$." + ".".join(path) + "'" for path in (paths if len(paths) > 1 else [*paths] * 2)
        )
        sql = f"json_extract({table}.state, {literals})"
    return literal_column(sql, type_=String)


def experiments_between(
    store: Store, start: datetime, end: datetime, target: str | None, *, state_paths: StatePaths
) -> list[WeekExperiment]:
    """Experiments created in the range (of one target or all), oldest first, with the values at
    `state_paths` of each run state (see `WeekExperiment`).

    Read through a Core connection, not an ORM session: the rows are plain tuples either way,
    and the ORM's loading layer was a tenth of a large week's build."""
    names = list(state_paths)
    paths = [("schema_version",), *(path for path, _ in state_paths.values())]
    query = select(*_COLUMNS, _values_array(paths, store.engine.dialect.name)).where(  # type: ignore[call-overload]  # more columns than sqlmodel's overloads
        col(Experiment.created_at) >= start, col(Experiment.created_at) < end
    )
    if target is not None:
        query = query.where(Experiment.target == target)
    width = len(_COLUMNS)
    absent = [None] * len(paths)

    def _decoded(text: str | None) -> tuple[int | None, dict[str, object]]:
        values = json.loads(text) if text else absent  # NULL: a state that is not a JSON object
        version = values[0]
        typed_version = version if type(version) is int else None
        return typed_version, dict(zip(names, values[1 : len(paths)], strict=True))

    with store.engine.connect() as connection:
        rows = connection.execute(query.order_by(col(Experiment.created_at), col(Experiment.id))).all()
    return [WeekExperiment._make((*row[:width], *_decoded(row[width]))) for row in rows]


def experiment_states(store: Store, ids: Sequence[int]) -> dict[int, Mapping[str, Any]]:
    """experiment id -> its whole run state, for the few rows a path read cannot serve (an older
    schema, an empty state)."""
    found: dict[int, Mapping[str, Any]] = {}
    with Session(store.engine) as session:
        for part in chunks(ids):
            query = select(Experiment.id, Experiment.state).where(col(Experiment.id).in_(part))
            for ident, state in session.exec(query).all():
                found[int(ident or 0)] = state
    return found


def observations_between(
    store: Store, start: datetime, end: datetime, target: str | None
) -> list[KnowledgeObservation]:
    """Knowledge observations made in the range (of one target or all), oldest first."""
    return _between(store, KnowledgeObservation, KnowledgeObservation.observed_at, start, end, target)


def hypotheses_of_week(
    store: Store, start: datetime, end: datetime, target: str | None, *, resolved: Sequence[str]
) -> list[Hypothesis]:
    """Those resolved (a status in `resolved`) during the range, then those still open at its end
    (by their status now), each part by id."""
    resolved_in = select(Hypothesis).where(
        col(Hypothesis.status).in_(resolved),
        col(Hypothesis.resolved_at) >= start,
        col(Hypothesis.resolved_at) < end,
    )
    still_open = select(Hypothesis).where(Hypothesis.status == "open", col(Hypothesis.created_at) < end)
    rows: list[Hypothesis] = []
    with Session(store.engine, expire_on_commit=False) as session:
        for query in (resolved_in, still_open):
            if target is not None:
                query = query.where(Hypothesis.target == target)
            rows.extend(session.exec(query.order_by(col(Hypothesis.id))).all())
    return rows


def snapshot_targets_between(store: Store, start: datetime, end: datetime) -> set[str]:
    """Targets with a start captured in the range."""
    query = select(Snapshot.target).where(col(Snapshot.captured_at) >= start, col(Snapshot.captured_at) < end)
    with Session(store.engine) as session:
        return set(session.exec(query.distinct()).all())


def snapshot_effectives_between(
    store: Store, names: Sequence[str], start: datetime, end: datetime
) -> list[tuple[int, str, datetime, Mapping[str, Any]]]:
    """(id, target, captured_at, effective) of the starts of `names` captured in the range, oldest first."""
    if not names:
        return []
    query = (
        select(Snapshot.id, Snapshot.target, Snapshot.captured_at, Snapshot.effective)
        .where(
            col(Snapshot.target).in_(names),
            col(Snapshot.captured_at) >= start,
            col(Snapshot.captured_at) < end,
        )
        .order_by(col(Snapshot.captured_at), col(Snapshot.id))
    )
    with Session(store.engine) as session:
        return [(int(i or 0), t, at, eff) for i, t, at, eff in session.exec(query).all()]


def snapshot_effectives(store: Store, ids: Sequence[int]) -> dict[int, Mapping[str, Any]]:
    """snapshot id -> its effective values, for the ids that exist."""
    found: dict[int, Mapping[str, Any]] = {}
    with Session(store.engine) as session:
        for part in chunks(ids):
            query = select(Snapshot.id, Snapshot.effective).where(col(Snapshot.id).in_(part))
            for sid, effective in session.exec(query).all():
                found[int(sid or 0)] = effective
    return found


def baseline_at(store: Store, target: str, end: datetime) -> Baseline | None:
    """The baseline pinned last before `end` (the active one then; old pins stay as history)."""
    query = (
        select(Baseline)
        .where(Baseline.target == target, col(Baseline.pinned_at) < end)
        .order_by(col(Baseline.pinned_at).desc(), col(Baseline.id).desc())
        .limit(1)
    )
    with Session(store.engine, expire_on_commit=False) as session:
        return session.exec(query).first()


def latest_snapshot_before(store: Store, target: str, end: datetime) -> Snapshot | None:
    """The target's newest start captured before `end`."""
    query = (
        select(Snapshot)
        .where(Snapshot.target == target, col(Snapshot.captured_at) < end)
        .order_by(col(Snapshot.captured_at).desc(), col(Snapshot.id).desc())
        .limit(1)
    )
    with Session(store.engine, expire_on_commit=False) as session:
        return session.exec(query).first()


def effective_before(store: Store, target: str, start: datetime) -> Mapping[str, Any] | None:
    """The effective values of the target's last start before `start` (only that column is read)."""
    query = (
        select(Snapshot.effective)
        .where(Snapshot.target == target, col(Snapshot.captured_at) < start)
        .order_by(col(Snapshot.captured_at).desc(), col(Snapshot.id).desc())
        .limit(1)
    )
    with Session(store.engine) as session:
        return session.exec(query).first()


_PEAK = {
    "sqlite": (
        "(SELECT max(json_extract(level.value, '$.{metric}')) FROM json_each({table}.summary, '$.levels') AS level"
        " WHERE json_type({table}.summary, '$.levels') = 'array' AND level.type = 'object'"
        " AND json_type(level.value, '$.{metric}') IN ('integer', 'real'))"
    ),
    "postgresql": (
        "(SELECT max((level ->> '{metric}')::float8) FROM json_array_elements("
        "CASE WHEN json_typeof({table}.summary -> 'levels') = 'array' THEN {table}.summary -> 'levels' END"
        ") AS level WHERE json_typeof(level) = 'object' AND json_typeof(level -> '{metric}') = 'number')"
    ),
}
"""Per dialect: the largest number at `metric` among a set summary's `levels` (objects only; a
bool, a string or a null is not a number), computed by the database. Why not in Python: decoding
every summary (a row of key metrics per level) to keep one number was among the largest costs
of a large week's digest in a profile of bench/digest_scale.py."""

METRIC_NAME = re.compile(r"[a-z][a-z0-9_]*")


def set_peaks_between(
    store: Store, names: Sequence[str], start: datetime, end: datetime, metric: str
) -> list[tuple[str, datetime, float | None]]:
    """(target, created_at, the best level's `metric`) of the measurement sets of `names` created
    in the range, oldest first; None for a set with no number there."""
    if not names:
        return []
    if not METRIC_NAME.fullmatch(metric):  # it is written into the SQL: a metric name, nothing else
        raise ValueError(f"not a metric name: {metric!r}")
    sql = _PEAK[store.engine.dialect.name].format(metric=metric, table=MeasurementSet.__tablename__)
    peak: ColumnElement[float] = literal_column(sql, type_=Float)
    query = (
        select(MeasurementSet.target, MeasurementSet.created_at, peak)
        .where(
            col(MeasurementSet.target).in_(names),
            col(MeasurementSet.created_at) >= start,
            col(MeasurementSet.created_at) < end,
        )
        .order_by(col(MeasurementSet.created_at), col(MeasurementSet.id))
    )
    with Session(store.engine) as session:
        return [
            (name, at, float(value) if value is not None else None)
            for name, at, value in session.exec(query).all()
        ]


def audit_events_of(store: Store, action: str, experiment_ids: Iterable[int]) -> list[AuditEvent]:
    """The audit events with this action about these experiments, oldest first."""
    wanted = sorted(set(experiment_ids))
    events: list[AuditEvent] = []
    with Session(store.engine, expire_on_commit=False) as session:
        for part in chunks(wanted):
            query = (
                select(AuditEvent)
                .where(col(AuditEvent.action) == action, col(AuditEvent.experiment_id).in_(part))
                .order_by(col(AuditEvent.id))
            )
            events.extend(session.exec(query).all())
    return events


def investigations_by_id(store: Store, ids: Iterable[int]) -> list[Investigation]:
    """The investigations with these ids (unknown ids are skipped)."""
    wanted = sorted(set(ids))
    rows: list[Investigation] = []
    with Session(store.engine, expire_on_commit=False) as session:
        for part in chunks(wanted):
            rows.extend(session.exec(select(Investigation).where(col(Investigation.id).in_(part))).all())
    return rows


def stored_targets(store: Store) -> set[str]:
    """Targets the store has experiments or starts of (one removed from flagbot.toml still has a history)."""
    with Session(store.engine) as session:
        names = set(session.exec(select(Experiment.target).distinct()).all())
        names.update(session.exec(select(Snapshot.target).distinct()).all())
    return names
