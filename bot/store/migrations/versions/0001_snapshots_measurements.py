"""First revision: snapshots (one server start each) and measurements (one benchmark run each).

Revision ID: 0001
Revises:
Create Date: 2026-11-29 19:22:10.741724
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "snapshot",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("node", sa.String(length=255), nullable=False),
        sa.Column("captured_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("invocation_id", sa.String(length=64), nullable=True),
        sa.Column("sglang_version", sa.String(length=64), nullable=True),
        sa.Column("requested_flags", sa.JSON(), nullable=False),
        sa.Column("environment", sa.JSON(), nullable=False),
        sa.Column("server_args", sa.JSON(), nullable=True),
        sa.Column("implied", sa.JSON(), nullable=False),
        sa.Column("effective", sa.JSON(), nullable=False),
        sa.Column("ready", sa.Boolean(), nullable=False),
        sa.Column("startup_error", sa.String(), nullable=True),
        sa.Column("startup_seconds", sa.Float(), nullable=True),
        sa.Column("journal_cursor", sa.String(length=512), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("snapshot", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_snapshot_captured_at"), ["captured_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_snapshot_target"), ["target"], unique=False)

    op.create_table(
        "measurement",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=True),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("profile", sa.String(length=200), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=True),
        sa.Column("request_rate", sa.Float(), nullable=True),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("client_bound", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["snapshot_id"], ["snapshot.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("measurement", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_measurement_snapshot_id"), ["snapshot_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_measurement_taken_at"), ["taken_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_measurement_target"), ["target"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("measurement", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_measurement_target"))
        batch_op.drop_index(batch_op.f("ix_measurement_taken_at"))
        batch_op.drop_index(batch_op.f("ix_measurement_snapshot_id"))

    op.drop_table("measurement")
    with op.batch_alter_table("snapshot", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshot_target"))
        batch_op.drop_index(batch_op.f("ix_snapshot_captured_at"))

    op.drop_table("snapshot")
