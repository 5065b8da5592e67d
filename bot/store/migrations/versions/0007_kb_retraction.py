"""Knowledge facts can be retracted (issue 18 item 3): `retracted_at`, `retracted_by` and
`retracted_because` on kb_observation; and the culprit facts that `isolate` learned before its
premises were measured are marked retracted, with the reason.

Which facts: a `culprit` fact written by isolate (its text starts with "isolate:") whose
experiment's outcome took the failing side as given (its message says "(given)") or whose probes
never saw a configuration fail (every one passed: the culprits rested on the assumed premise
alone), or whose experiment is gone (nothing shows the premise measured); and any fact whose text
says "(given)". A retracted fact is kept (the log still shows it) but never cited again.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

RETRACTED_BY = "migration 0007"
REASON = (
    "learned by isolate from a premise that was never measured: the failing side was taken as "
    "given, and no probe saw the culprits fail (issue 18)"
)


def _unmeasured(text: str, kind: str, state: object, found: bool) -> bool:
    """Whether a fact rests on a premise nobody measured (see the module docstring)."""
    if "(given)" in text:
        return True
    if kind != "culprit" or not text.startswith("isolate:"):
        return False
    if not found or not isinstance(state, dict):
        return True
    outcome = state.get("isolate") or {}
    if "(given)" in str(outcome.get("message") or ""):
        return True
    probes = outcome.get("probes") or []
    return all(isinstance(p, dict) and p.get("passed", True) for p in probes)


def upgrade() -> None:
    with op.batch_alter_table("kb_observation", schema=None) as batch_op:
        batch_op.add_column(sa.Column("retracted_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("retracted_by", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("retracted_because", sa.String(), nullable=True))
    observation = sa.table(
        "kb_observation",
        sa.column("id", sa.Integer()),
        sa.column("kind", sa.String()),
        sa.column("text", sa.String()),
        sa.column("experiment_id", sa.Integer()),
        sa.column("retracted_at", sa.DateTime(timezone=True)),
        sa.column("retracted_by", sa.String()),
        sa.column("retracted_because", sa.String()),
    )
    experiment = sa.table("experiment", sa.column("id", sa.Integer()), sa.column("state", sa.JSON()))
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(observation.c.id, observation.c.kind, observation.c.text, observation.c.experiment_id)
    ).all()
    states: dict[int, Any] = {}
    wanted = {row.experiment_id for row in rows if row.experiment_id is not None}
    if wanted:
        query = sa.select(experiment.c.id, experiment.c.state).where(experiment.c.id.in_(sorted(wanted)))
        states = {row.id: row.state for row in connection.execute(query)}
    now = datetime.now(UTC)
    for row in rows:
        found = row.experiment_id in states
        if _unmeasured(row.text or "", row.kind or "", states.get(row.experiment_id), found):
            connection.execute(
                observation.update()
                .where(observation.c.id == row.id)
                .values(retracted_at=now, retracted_by=RETRACTED_BY, retracted_because=REASON)
            )


def downgrade() -> None:
    with op.batch_alter_table("kb_observation", schema=None) as batch_op:
        batch_op.drop_column("retracted_because")
        batch_op.drop_column("retracted_by")
        batch_op.drop_column("retracted_at")
