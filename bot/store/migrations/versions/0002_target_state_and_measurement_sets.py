"""Target state (divergence, hand-edit checksums, known-good start), drop-in backups, measurement sets, comparisons.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 20:11:17.252587
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "dropin_backup",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("node", sa.String(length=255), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("path", sa.String(length=1024), nullable=False),
        sa.Column("content", sa.String(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("dropin_backup", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dropin_backup_taken_at"), ["taken_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_dropin_backup_target"), ["target"], unique=False)

    op.create_table(
        "measurement_set",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=True),
        sa.Column("profile", sa.String(length=200), nullable=False),
        sa.Column("backend", sa.String(length=32), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("client", sa.JSON(), nullable=False),
        sa.Column("client_bound", sa.Boolean(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["snapshot_id"], ["snapshot.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("measurement_set", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_measurement_set_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_measurement_set_snapshot_id"), ["snapshot_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_measurement_set_target"), ["target"], unique=False)

    op.create_table(
        "target_state",
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("diverged", sa.Boolean(), nullable=False),
        sa.Column("diverged_nodes", sa.JSON(), nullable=False),
        sa.Column("diverged_reason", sa.String(), nullable=True),
        sa.Column("unit_sha256", sa.JSON(), nullable=False),
        sa.Column("known_good_snapshot_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["known_good_snapshot_id"], ["snapshot.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("target"),
    )
    with op.batch_alter_table("target_state", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_target_state_updated_at"), ["updated_at"], unique=False)

    op.create_table(
        "comparison",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reference_set_id", sa.Integer(), nullable=False),
        sa.Column("candidate_set_id", sa.Integer(), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=False),
        sa.Column("guarded_by", sa.String(length=200), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["candidate_set_id"], ["measurement_set.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["reference_set_id"], ["measurement_set.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("comparison", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_comparison_candidate_set_id"), ["candidate_set_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_comparison_created_at"), ["created_at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_comparison_reference_set_id"), ["reference_set_id"], unique=False
        )

    with op.batch_alter_table("measurement", schema=None) as batch_op:
        batch_op.add_column(sa.Column("set_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_measurement_set_id"), ["set_id"], unique=False)
        batch_op.create_foreign_key(
            "fk_measurement_set_id", "measurement_set", ["set_id"], ["id"], ondelete="CASCADE"
        )


def downgrade() -> None:

    with op.batch_alter_table("measurement", schema=None) as batch_op:
        batch_op.drop_constraint("fk_measurement_set_id", type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_measurement_set_id"))
        batch_op.drop_column("set_id")

    with op.batch_alter_table("comparison", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_comparison_reference_set_id"))
        batch_op.drop_index(batch_op.f("ix_comparison_created_at"))
        batch_op.drop_index(batch_op.f("ix_comparison_candidate_set_id"))

    op.drop_table("comparison")
    with op.batch_alter_table("target_state", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_target_state_updated_at"))

    op.drop_table("target_state")
    with op.batch_alter_table("measurement_set", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_measurement_set_target"))
        batch_op.drop_index(batch_op.f("ix_measurement_set_snapshot_id"))
        batch_op.drop_index(batch_op.f("ix_measurement_set_created_at"))

    op.drop_table("measurement_set")
    with op.batch_alter_table("dropin_backup", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dropin_backup_target"))
        batch_op.drop_index(batch_op.f("ix_dropin_backup_taken_at"))

    op.drop_table("dropin_backup")
