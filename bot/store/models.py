"""Tables of the foundation: what one server start looked like, and what a benchmark measured.

Later features add tables only through new Alembic revisions; a test compares these models
with the migrations so the two cannot drift apart.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Dialect
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on every backend: SQLite forgets the zone, so it is put back on read."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use datetime.now(UTC)")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _timestamp() -> datetime:
    """A required UTC timestamp column, now by default.

    Typed as the value the model holds (as pydantic's `Field` is), not as the FieldInfo.
    """
    field: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False, index=True)
    )
    return field


class Snapshot(SQLModel, table=True):
    """One start of a target's server: requested and printed flags, effective capacity, errors."""

    __tablename__ = "snapshot"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    node: str = Field(default="", max_length=255)
    captured_at: datetime = _timestamp()
    invocation_id: str | None = Field(default=None, max_length=64)
    sglang_version: str | None = Field(default=None, max_length=64)
    requested_flags: list[dict[str, Any]] = Field(
        default_factory=list, sa_column=Column(JSON, nullable=False)
    )
    environment: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    server_args: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    implied: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    effective: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    ready: bool = False
    startup_error: str | None = None
    startup_seconds: float | None = None
    journal_cursor: str | None = Field(default=None, max_length=512)


class Measurement(SQLModel, table=True):
    """One benchmark run at one concurrency and repeat, with bench_serving's own metric names."""

    __tablename__ = "measurement"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    snapshot_id: int | None = Field(default=None, foreign_key="snapshot.id", index=True, ondelete="SET NULL")
    taken_at: datetime = _timestamp()
    profile: str = Field(default="", max_length=200)
    concurrency: int | None = None
    request_rate: float | None = None
    repeat: int = 0
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    client_bound: bool = False
    source: str = Field(default="flagbot", max_length=64)
    set_id: int | None = Field(default=None, foreign_key="measurement_set.id", index=True, ondelete="CASCADE")


class DropinBackup(SQLModel, table=True):
    """A drop-in's content before flagbot overwrote it, kept in the store as well as on the host."""

    __tablename__ = "dropin_backup"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    node: str = Field(max_length=255)
    taken_at: datetime = _timestamp()
    path: str = Field(max_length=1024)
    content: str = ""
    sha256: str = Field(max_length=64)
    reason: str = Field(default="", max_length=200)


class TargetState(SQLModel, table=True):
    """What flagbot last saw of a target: per-node checksums, divergence and the known-good start."""

    __tablename__ = "target_state"

    target: str = Field(primary_key=True, max_length=200)
    updated_at: datetime = _timestamp()
    diverged: bool = False
    diverged_nodes: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    diverged_reason: str | None = None
    unit_sha256: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """node -> checksum of `systemctl cat` as flagbot last left it (detects hand edits)."""
    known_good_snapshot_id: int | None = Field(default=None, foreign_key="snapshot.id", ondelete="SET NULL")
    traffic_stopped_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    """When flagbot's drain stop hook took the server out of service (`[targets.X.drain]`); set
    until the resume hook let work back in, so a run that died in between leaves it to the next."""


class MeasurementSet(SQLModel, table=True):
    """One benchmark run of a configuration: its measurements, client health and summary."""

    __tablename__ = "measurement_set"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    created_at: datetime = _timestamp()
    snapshot_id: int | None = Field(default=None, foreign_key="snapshot.id", index=True, ondelete="SET NULL")
    profile: str = Field(default="", max_length=200)
    backend: str = Field(default="builtin", max_length=32)
    label: str = Field(default="", max_length=200)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    client: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    client_bound: bool = False
    summary: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class Comparison(SQLModel, table=True):
    """A verdict between two measurement sets (A = reference, B = candidate), per metric and overall."""

    __tablename__ = "comparison"

    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = _timestamp()
    reference_set_id: int = Field(foreign_key="measurement_set.id", index=True, ondelete="CASCADE")
    candidate_set_id: int = Field(foreign_key="measurement_set.id", index=True, ondelete="CASCADE")
    verdict: str = Field(max_length=32)
    guarded_by: str | None = Field(default=None, max_length=200)
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
