"""A target remembers that flagbot's drain took it out of service (issue 20 item 3):
`target_state.traffic_stopped_at`, set by the stop hook and cleared by the resume hook.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("target_state") as batch:
        batch.add_column(sa.Column("traffic_stopped_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("target_state") as batch:
        batch.drop_column("traffic_stopped_at")
