"""An index on the audit log by target, action and time: the freeze and restart-budget checks
every playbook command makes before Slack's acknowledgement read one action of one target, and
without it they read every audit row of that target (issue 16 item 9; bench/audit_queries.py).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_audit_event_target_action_at", "audit_event", ["target", "action", "at"])


def downgrade() -> None:
    op.drop_index("ix_audit_event_target_action_at", table_name="audit_event")
