"""Tables of the diagnostic loop (revision 0003): leases, experiments and their steps, hypotheses,
evidence, the audit trail, pinned baselines, investigations and knowledge observations.

The repository functions over them live in `bot.store.leases`, `.experiments`, `.hypotheses`,
`.records`, `.baselines`, `.investigations` and `.observations`; docs/store.md describes them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index
from sqlmodel import Field, SQLModel

from bot.store.models import UTCDateTime, _timestamp

EXPERIMENT_STATUSES = ("pending", "running", "succeeded", "failed", "cancelled", "rolled-back", "interrupted")
UNFINISHED_STATUSES = ("pending", "running", "interrupted")
CANCELLABLE_STATUSES = ("pending", "running")
STEP_STATUSES = ("running", "ok", "failed", "skipped", "stopped")
STEP_ADVANCING_STATUSES = ("ok", "skipped", "stopped")
HYPOTHESIS_STATUSES = ("open", "confirmed", "refuted", "inconclusive")


def _optional_timestamp() -> datetime | None:
    """A UTC timestamp column, empty by default.

    Typed as the value the model holds (as pydantic's `Field` is), not as the FieldInfo.
    """
    field: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    return field


def _json_dict() -> dict[str, Any]:
    """A JSON column holding an object, empty by default.

    Typed as the value the model holds (as pydantic's `Field` is), not as the FieldInfo.
    """
    field: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    return field


class Investigation(SQLModel, table=True):
    """A question about a target that hypotheses, experiments and evidence are gathered under."""

    __tablename__ = "investigation"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    title: str
    status: str = Field(default="open", max_length=32)
    created_by: str = Field(max_length=200)
    created_at: datetime = _timestamp()
    channel: str | None = Field(default=None, max_length=200)
    thread_ts: str | None = Field(default=None, max_length=64)


class Hypothesis(SQLModel, table=True):
    """A statement to test ("--x raises throughput at 64"), with what would confirm it."""

    __tablename__ = "hypothesis"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    investigation_id: int | None = Field(
        default=None, foreign_key="investigation.id", index=True, ondelete="SET NULL"
    )
    statement: str
    variable: str | None = Field(default=None, max_length=200)
    expectations: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    status: str = Field(default="open", max_length=32)
    because: str | None = None
    created_by: str = Field(max_length=200)
    created_at: datetime = _timestamp()
    resolved_at: datetime | None = _optional_timestamp()


class Baseline(SQLModel, table=True):
    """A pinned reference start of a target (and optionally its benchmark); one is active at a time."""

    __tablename__ = "baseline"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    snapshot_id: int = Field(foreign_key="snapshot.id", index=True, ondelete="CASCADE")
    set_id: int | None = Field(default=None, foreign_key="measurement_set.id", ondelete="SET NULL")
    note: str = ""
    pinned_by: str = Field(max_length=200)
    pinned_at: datetime = _timestamp()
    active: bool = Field(default=True, index=True)


class Experiment(SQLModel, table=True):
    """One run of a playbook against a target: its parameters, progress (cursor, state) and outcome."""

    __tablename__ = "experiment"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    playbook: str = Field(max_length=200)
    params: dict[str, Any] = _json_dict()
    status: str = Field(default="pending", index=True, max_length=32)
    verdict: str | None = Field(default=None, max_length=32)
    cursor: int = 0
    """Index of the next step to run; a resumed run starts there."""
    state: dict[str, Any] = _json_dict()
    holder: str | None = Field(default=None, max_length=200)
    actor: str = Field(max_length=200)
    hypothesis_id: int | None = Field(
        default=None, foreign_key="hypothesis.id", index=True, ondelete="SET NULL"
    )
    investigation_id: int | None = Field(
        default=None, foreign_key="investigation.id", index=True, ondelete="SET NULL"
    )
    baseline_id: int | None = Field(default=None, foreign_key="baseline.id", ondelete="SET NULL")
    before_snapshot_id: int | None = Field(default=None, foreign_key="snapshot.id", ondelete="SET NULL")
    after_snapshot_id: int | None = Field(default=None, foreign_key="snapshot.id", ondelete="SET NULL")
    summary: str | None = None
    cancel_requested_by: str | None = Field(default=None, max_length=200)
    created_at: datetime = _timestamp()
    started_at: datetime | None = _optional_timestamp()
    finished_at: datetime | None = _optional_timestamp()


class ExperimentStep(SQLModel, table=True):
    """One step of an experiment as it ran: the action, its arguments, result or error."""

    __tablename__ = "experiment_step"

    id: int | None = Field(default=None, primary_key=True)
    experiment_id: int = Field(foreign_key="experiment.id", index=True, ondelete="CASCADE")
    index: int
    name: str = Field(max_length=200)
    action: str = Field(max_length=200)
    args: dict[str, Any] = _json_dict()
    status: str = Field(default="running", max_length=32)
    result: dict[str, Any] = _json_dict()
    error: str | None = None
    started_at: datetime = _timestamp()
    finished_at: datetime | None = _optional_timestamp()


class EvidenceRecord(SQLModel, table=True):
    """A piece of evidence a step emitted (a table, a chart's data, a log excerpt)."""

    __tablename__ = "evidence"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    experiment_id: int | None = Field(
        default=None, foreign_key="experiment.id", index=True, ondelete="CASCADE"
    )
    investigation_id: int | None = Field(
        default=None, foreign_key="investigation.id", index=True, ondelete="SET NULL"
    )
    step_index: int | None = None
    kind: str = Field(max_length=64)
    title: str
    data: dict[str, Any] = _json_dict()
    created_at: datetime = _timestamp()


class AuditEvent(SQLModel, table=True):
    """Who did what to which target, when; kept when the experiment it names is deleted."""

    __tablename__ = "audit_event"
    __table_args__ = (
        # every playbook command asks for the target's latest freeze and its restarts of the last
        # hour, before Slack's acknowledgement: without it both read every audit row of the target
        # (111 and 44 ms a query at 100,000 rows: bench/audit_queries.py, 2026-12-07)
        Index("ix_audit_event_target_action_at", "target", "action", "at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _timestamp()
    actor: str = Field(max_length=200)
    target: str = Field(index=True, max_length=200)
    action: str = Field(max_length=64)
    experiment_id: int | None = Field(
        default=None, foreign_key="experiment.id", index=True, ondelete="SET NULL"
    )
    detail: dict[str, Any] = _json_dict()


class KnowledgeObservation(SQLModel, table=True):
    """What was learnt about a flag on some hardware and SGLang version, for the knowledge base."""

    __tablename__ = "kb_observation"

    id: int | None = Field(default=None, primary_key=True)
    flag: str = Field(index=True, max_length=200)
    kind: str = Field(max_length=64)
    text: str
    target: str = Field(index=True, max_length=200)
    gpu_name: str | None = Field(default=None, max_length=200)
    compute_capability: str | None = Field(default=None, max_length=16)
    sglang_version: str | None = Field(default=None, max_length=64)
    experiment_id: int | None = Field(
        default=None, foreign_key="experiment.id", index=True, ondelete="SET NULL"
    )
    detail: dict[str, Any] = _json_dict()
    observed_at: datetime = _timestamp()
    retracted_at: datetime | None = _optional_timestamp()
    """Set when the fact was retracted (`knowledge forget`, or migration 0007 for a fact learned from
    a premise never measured); a retracted fact is kept, shown as such, and never cited."""
    retracted_by: str | None = Field(default=None, max_length=200)
    retracted_because: str | None = None


class Lease(SQLModel, table=True):
    """Who may change a target right now; one row per target, kept alive by heartbeats."""

    __tablename__ = "lease"

    target: str = Field(primary_key=True, max_length=200)
    holder: str = Field(max_length=200)
    host: str = Field(max_length=255)
    pid: int
    purpose: str = Field(max_length=200)
    experiment_id: int | None = Field(
        default=None, foreign_key="experiment.id", index=True, ondelete="SET NULL"
    )
    acquired_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    heartbeat_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    ttl_s: float = 60.0


class LeaseWaiter(SQLModel, table=True):
    """A command waiting (`wait=`) for a busy target's lease (revision 0009): the queue that
    gives a released lease to the oldest live waiter, and that `cancel waiter=ID` reaches."""

    __tablename__ = "lease_waiter"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(max_length=200, index=True)
    holder: str = Field(max_length=200)
    purpose: str = Field(max_length=200)
    requested_by: str = Field(max_length=200)
    command: str = ""
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    seen_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    deadline: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    cancelled_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    cancelled_by: str | None = Field(default=None, max_length=200)
