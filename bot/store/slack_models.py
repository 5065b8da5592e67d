"""Tables of the Slack layer: requests for a second person's approval (or the requester's own
confirmation) before a restart.

Why in the store: an approval outlives the process that asked for it (a bot restart must not
lose a pending request, nor let an expired one through), and deciding it must be atomic so a
double click or two approvers at once decide it once.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column
from sqlmodel import Field, SQLModel

from bot.store.models import UTCDateTime, _timestamp

APPROVAL_STATUSES = ("pending", "approved", "denied", "expired")


class ApprovalRequest(SQLModel, table=True):
    """A command waiting for an approver (or its requester's confirmation) before it runs."""

    __tablename__ = "approval_request"

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(index=True, max_length=200)
    command: str
    """The command text as typed (without `/flagbot`), run as typed once approved."""
    requester: str = Field(max_length=64)
    needs: str = Field(default="approval", max_length=32)
    status: str = Field(default="pending", max_length=32, index=True)
    channel: str = Field(max_length=64)
    card_ts: str | None = Field(default=None, max_length=64)
    created_at: datetime = _timestamp()
    expires_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    decided_by: str | None = Field(default=None, max_length=64)
    decided_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))


class SeenKey(SQLModel, table=True):
    """An idempotency key (a button's nonce, an event's id) already acted on.

    In the store, not in memory: Slack redelivers an event it thinks was lost, possibly to a bot
    that restarted in between; the primary key makes "first time?" one atomic insert.
    """

    __tablename__ = "slack_seen_key"

    key: str = Field(primary_key=True, max_length=200)
    actor: str = Field(max_length=64)
    seen_at: datetime = _timestamp()
