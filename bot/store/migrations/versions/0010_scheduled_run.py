"""Runs of scheduled jobs claimed across replicas (issue 25 item 1): `scheduled_run`, one row per
job and period, so a job a killed leader had started runs once on the next leader, never twice.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scheduled_run",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("job", sa.String(length=100), nullable=False),
        sa.Column("replica", sa.String(length=200), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("key"),
    )


def downgrade() -> None:
    op.drop_table("scheduled_run")
