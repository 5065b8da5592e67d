"""Tables of the scheduler (revision 0006): verification checks and their runs, drift watch state,
and APScheduler's own job table.

Why the job table is declared here: APScheduler's `SQLAlchemyJobStore` would create
`apscheduler_jobs` itself on first start, outside Alembic. Declaring the same columns here and
creating the table in revision 0006 keeps every table of flagbot's database under migrations
(the job store then finds it and creates nothing).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Float, LargeBinary, Table, Unicode
from sqlmodel import Field, SQLModel

from bot.store.loop_models import _json_dict, _optional_timestamp
from bot.store.models import UTCDateTime, _timestamp

CHECK_STATUSES = ("scheduled", "paused", "done")
"""scheduled: its run is ahead; paused: it will not run until resumed; done: its run happened."""
CHECK_RESULTS = ("pass", "fail", "error", "busy")
"""pass / fail are the check's states; error (it could not look) and busy (the lease stayed held)
are recorded but never change the state."""
CHECK_STATES = ("pass", "fail")
DRIFT_STATES = ("ok", "drift")

JOBS_TABLE = "apscheduler_jobs"

scheduler_jobs = Table(
    JOBS_TABLE,
    SQLModel.metadata,
    Column("id", Unicode(191), primary_key=True),
    Column("next_run_time", Float(25), index=True),
    Column("job_state", LargeBinary, nullable=False),
)
"""Exactly the columns `apscheduler.jobstores.sqlalchemy.SQLAlchemyJobStore` defines (3.x)."""


class VerificationCheck(SQLModel, table=True):
    """A re-check of what an experiment concluded, due some time after it (10 min, 24 h, ...)."""

    __tablename__ = "verification_check"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    experiment_id: int | None = Field(
        default=None, foreign_key="experiment.id", index=True, ondelete="CASCADE"
    )
    after_s: float = 0.0
    """How long after the experiment it is due (the `schedules.check_after` entry)."""
    due_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False, index=True))
    status: str = Field(default="scheduled", max_length=32, index=True)
    profile: str | None = Field(default=None, max_length=200)
    expected: dict[str, Any] = _json_dict()
    """What the experiment concluded: verdict, flags, effective capacity, its measurement set."""
    channel: str | None = Field(default=None, max_length=200)
    thread_ts: str | None = Field(default=None, max_length=64)
    """The experiment's Slack thread, where a change of state is posted."""
    created_by: str = Field(max_length=200)
    created_at: datetime = _timestamp()
    runs: int = 0
    last_run_at: datetime | None = _optional_timestamp()
    last_result: str | None = Field(default=None, max_length=32)
    last_summary: str | None = None


class CheckRun(SQLModel, table=True):
    """One run of a check: its result (always recorded) and whether it was posted."""

    __tablename__ = "check_run"

    id: int | None = Field(default=None, primary_key=True)
    check_id: int = Field(foreign_key="verification_check.id", index=True, ondelete="CASCADE")
    experiment_id: int | None = Field(default=None, index=True)
    target: str = Field(index=True, max_length=200)
    ran_at: datetime = _timestamp()
    trigger: str = Field(default="schedule", max_length=32)
    result: str = Field(max_length=32)
    previous_state: str = Field(default="pass", max_length=32)
    summary: str = ""
    detail: dict[str, Any] = _json_dict()
    snapshot_id: int | None = Field(default=None, foreign_key="snapshot.id", ondelete="SET NULL")
    set_id: int | None = Field(default=None, foreign_key="measurement_set.id", ondelete="SET NULL")
    posted_ts: str | None = Field(default=None, max_length=64)


class DriftState(SQLModel, table=True):
    """The drift watch's current view of a target: its findings and what it compares with."""

    __tablename__ = "drift_state"

    target: str = Field(primary_key=True, max_length=200)
    state: str = Field(default="ok", max_length=32)
    findings: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    reference: dict[str, Any] = _json_dict()
    """Unit checksums and the invocation first seen, for a target flagbot never changed."""
    checked_at: datetime = _timestamp()
    changed_at: datetime = _timestamp()


class DriftEvent(SQLModel, table=True):
    """A change of a target's drift state (new findings, or findings gone), with its evidence."""

    __tablename__ = "drift_event"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    at: datetime = _timestamp()
    state: str = Field(max_length=32)
    findings: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    resolved: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    posted_ts: str | None = Field(default=None, max_length=64)


__all__ = [
    "CHECK_RESULTS",
    "CHECK_STATES",
    "CHECK_STATUSES",
    "DRIFT_STATES",
    "JOBS_TABLE",
    "CheckRun",
    "DriftEvent",
    "DriftState",
    "VerificationCheck",
    "scheduler_jobs",
]


class ScheduledRun(SQLModel, table=True):
    """One run of a scheduled job that must happen once across replicas (revision 0010): claimed
    before it starts, finished when it has. APScheduler moves a job's next run time forward when it
    *starts* the job, so a leader killed in the middle leaves a run the job store no longer holds;
    this row is how the next leader knows it is owed (`bot.store.scheduled_runs`)."""

    __tablename__ = "scheduled_run"

    key: str = Field(primary_key=True, max_length=200)
    """What ran, for which period: `digest:2026-W48`."""
    job: str = Field(max_length=100)
    replica: str = Field(max_length=200)
    """The replica that claimed it last (`bot.app.runtime.this_replica`)."""
    started_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    finished_at: datetime | None = _optional_timestamp()
