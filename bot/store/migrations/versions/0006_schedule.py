"""The scheduler's tables: verification checks and their runs, drift watch state and events, and
APScheduler's job table (created here so that every table is under migrations).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "apscheduler_jobs",
        sa.Column("id", sa.Unicode(length=191), nullable=False),
        sa.Column("next_run_time", sa.Float(precision=25), nullable=True),
        sa.Column("job_state", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_apscheduler_jobs_next_run_time", "apscheduler_jobs", ["next_run_time"])
    op.create_table(
        "verification_check",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=True),
        sa.Column("after_s", sa.Float(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("profile", sa.String(length=200), nullable=True),
        sa.Column("expected", sa.JSON(), nullable=False),
        sa.Column("channel", sa.String(length=200), nullable=True),
        sa.Column("thread_ts", sa.String(length=64), nullable=True),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("last_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_result", sa.String(length=32), nullable=True),
        sa.Column("last_summary", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiment.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    for column in ("target", "experiment_id", "due_at", "status", "created_at"):
        op.create_index(f"ix_verification_check_{column}", "verification_check", [column])
    op.create_table(
        "check_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("check_id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=True),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("ran_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trigger", sa.String(length=32), nullable=False),
        sa.Column("result", sa.String(length=32), nullable=False),
        sa.Column("previous_state", sa.String(length=32), nullable=False),
        sa.Column("summary", sa.String(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=True),
        sa.Column("set_id", sa.Integer(), nullable=True),
        sa.Column("posted_ts", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["check_id"], ["verification_check.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["snapshot_id"], ["snapshot.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["set_id"], ["measurement_set.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    for column in ("check_id", "experiment_id", "target", "ran_at"):
        op.create_index(f"ix_check_run_{column}", "check_run", [column])
    op.create_table(
        "drift_state",
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("findings", sa.JSON(), nullable=False),
        sa.Column("reference", sa.JSON(), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("target"),
    )
    op.create_index("ix_drift_state_checked_at", "drift_state", ["checked_at"])
    op.create_index("ix_drift_state_changed_at", "drift_state", ["changed_at"])
    op.create_table(
        "drift_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("findings", sa.JSON(), nullable=False),
        sa.Column("resolved", sa.JSON(), nullable=False),
        sa.Column("posted_ts", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_drift_event_target", "drift_event", ["target"])
    op.create_index("ix_drift_event_at", "drift_event", ["at"])


def downgrade() -> None:
    op.drop_table("drift_event")
    op.drop_table("drift_state")
    op.drop_table("check_run")
    op.drop_table("verification_check")
    op.drop_table("apscheduler_jobs")
