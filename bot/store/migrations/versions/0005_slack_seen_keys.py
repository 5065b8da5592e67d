"""Idempotency keys of the Slack layer (button nonces, event ids), kept across restarts.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slack_seen_key",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_slack_seen_key_seen_at", "slack_seen_key", ["seen_at"])


def downgrade() -> None:
    op.drop_index("ix_slack_seen_key_seen_at", table_name="slack_seen_key")
    op.drop_table("slack_seen_key")
