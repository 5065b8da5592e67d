"""Approval requests of the Slack layer.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approval_request",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("command", sa.String(), nullable=False),
        sa.Column("requester", sa.String(length=64), nullable=False),
        sa.Column("needs", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("card_ts", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_by", sa.String(length=64), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_approval_request_target", "approval_request", ["target"])
    op.create_index("ix_approval_request_status", "approval_request", ["status"])
    op.create_index("ix_approval_request_created_at", "approval_request", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_approval_request_created_at", table_name="approval_request")
    op.drop_index("ix_approval_request_status", table_name="approval_request")
    op.drop_index("ix_approval_request_target", table_name="approval_request")
    op.drop_table("approval_request")
