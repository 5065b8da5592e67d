"""The diagnostic loop: leases, experiments and steps, hypotheses, evidence, audit events, baselines,
investigations and knowledge observations.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 22:21:20.245680
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "investigation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("channel", sa.String(length=200), nullable=True),
        sa.Column("thread_ts", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("investigation", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_investigation_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_investigation_target"), ["target"], unique=False)

    op.create_table(
        "hypothesis",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("investigation_id", sa.Integer(), nullable=True),
        sa.Column("statement", sa.String(), nullable=False),
        sa.Column("variable", sa.String(length=200), nullable=True),
        sa.Column("expectations", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("because", sa.String(), nullable=True),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["investigation_id"], ["investigation.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("hypothesis", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_hypothesis_created_at"), ["created_at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_hypothesis_investigation_id"), ["investigation_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_hypothesis_target"), ["target"], unique=False)

    op.create_table(
        "baseline",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=True),
        sa.Column("note", sa.String(), nullable=False),
        sa.Column("pinned_by", sa.String(length=200), nullable=False),
        sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["set_id"], ["measurement_set.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["snapshot_id"], ["snapshot.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("baseline", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_baseline_active"), ["active"], unique=False)
        batch_op.create_index(batch_op.f("ix_baseline_pinned_at"), ["pinned_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_baseline_snapshot_id"), ["snapshot_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_baseline_target"), ["target"], unique=False)

    op.create_table(
        "experiment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("playbook", sa.String(length=200), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=True),
        sa.Column("cursor", sa.Integer(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=True),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("hypothesis_id", sa.Integer(), nullable=True),
        sa.Column("investigation_id", sa.Integer(), nullable=True),
        sa.Column("baseline_id", sa.Integer(), nullable=True),
        sa.Column("before_snapshot_id", sa.Integer(), nullable=True),
        sa.Column("after_snapshot_id", sa.Integer(), nullable=True),
        sa.Column("summary", sa.String(), nullable=True),
        sa.Column("cancel_requested_by", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["after_snapshot_id"], ["snapshot.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["baseline_id"], ["baseline.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["before_snapshot_id"], ["snapshot.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["hypothesis_id"], ["hypothesis.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["investigation_id"], ["investigation.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("experiment", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_experiment_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_experiment_hypothesis_id"), ["hypothesis_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_experiment_investigation_id"), ["investigation_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_experiment_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_experiment_target"), ["target"], unique=False)

    op.create_table(
        "audit_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiment.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("audit_event", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_event_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_event_experiment_id"), ["experiment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_event_target"), ["target"], unique=False)

    op.create_table(
        "evidence",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=True),
        sa.Column("investigation_id", sa.Integer(), nullable=True),
        sa.Column("step_index", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiment.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["investigation_id"], ["investigation.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("evidence", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_evidence_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_evidence_experiment_id"), ["experiment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_evidence_investigation_id"), ["investigation_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_evidence_target"), ["target"], unique=False)

    op.create_table(
        "experiment_step",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiment.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("experiment_step", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_experiment_step_experiment_id"), ["experiment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_experiment_step_started_at"), ["started_at"], unique=False)

    op.create_table(
        "kb_observation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("flag", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("gpu_name", sa.String(length=200), nullable=True),
        sa.Column("compute_capability", sa.String(length=16), nullable=True),
        sa.Column("sglang_version", sa.String(length=64), nullable=True),
        sa.Column("experiment_id", sa.Integer(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiment.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("kb_observation", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_kb_observation_experiment_id"), ["experiment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_kb_observation_flag"), ["flag"], unique=False)
        batch_op.create_index(batch_op.f("ix_kb_observation_observed_at"), ["observed_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_kb_observation_target"), ["target"], unique=False)

    op.create_table(
        "lease",
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("purpose", sa.String(length=200), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=True),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ttl_s", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiment.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("target"),
    )
    with op.batch_alter_table("lease", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lease_experiment_id"), ["experiment_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("lease", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lease_experiment_id"))

    op.drop_table("lease")
    with op.batch_alter_table("kb_observation", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_kb_observation_target"))
        batch_op.drop_index(batch_op.f("ix_kb_observation_observed_at"))
        batch_op.drop_index(batch_op.f("ix_kb_observation_flag"))
        batch_op.drop_index(batch_op.f("ix_kb_observation_experiment_id"))

    op.drop_table("kb_observation")
    with op.batch_alter_table("experiment_step", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_experiment_step_started_at"))
        batch_op.drop_index(batch_op.f("ix_experiment_step_experiment_id"))

    op.drop_table("experiment_step")
    with op.batch_alter_table("evidence", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_evidence_target"))
        batch_op.drop_index(batch_op.f("ix_evidence_investigation_id"))
        batch_op.drop_index(batch_op.f("ix_evidence_experiment_id"))
        batch_op.drop_index(batch_op.f("ix_evidence_created_at"))

    op.drop_table("evidence")
    with op.batch_alter_table("audit_event", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_event_target"))
        batch_op.drop_index(batch_op.f("ix_audit_event_experiment_id"))
        batch_op.drop_index(batch_op.f("ix_audit_event_at"))

    op.drop_table("audit_event")
    with op.batch_alter_table("experiment", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_experiment_target"))
        batch_op.drop_index(batch_op.f("ix_experiment_status"))
        batch_op.drop_index(batch_op.f("ix_experiment_investigation_id"))
        batch_op.drop_index(batch_op.f("ix_experiment_hypothesis_id"))
        batch_op.drop_index(batch_op.f("ix_experiment_created_at"))

    op.drop_table("experiment")
    with op.batch_alter_table("baseline", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_baseline_target"))
        batch_op.drop_index(batch_op.f("ix_baseline_snapshot_id"))
        batch_op.drop_index(batch_op.f("ix_baseline_pinned_at"))
        batch_op.drop_index(batch_op.f("ix_baseline_active"))

    op.drop_table("baseline")
    with op.batch_alter_table("hypothesis", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_hypothesis_target"))
        batch_op.drop_index(batch_op.f("ix_hypothesis_investigation_id"))
        batch_op.drop_index(batch_op.f("ix_hypothesis_created_at"))

    op.drop_table("hypothesis")
    with op.batch_alter_table("investigation", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_investigation_target"))
        batch_op.drop_index(batch_op.f("ix_investigation_created_at"))

    op.drop_table("investigation")
