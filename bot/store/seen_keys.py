"""Idempotency keys of the Slack layer: `first_time(key)` is True exactly once, across restarts.

Two kinds of keys share the table. A button's nonce (`click:...`) is kept for good: a button
acts once, however late the second click comes. A delivery's key (`delivery:...`: a slash
command's trigger id, an event's id) only has to outlive Slack's redeliveries and a signed
request's replay window (Bolt refuses a request signed more than 5 minutes ago; Slack retries
an event for about an hour), so `forget_deliveries` drops those older than `DELIVERY_KEEP`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from bot.store.models import utcnow
from bot.store.slack_models import SeenKey
from bot.store.store import Store

__all__ = ["DELIVERY_KEEP", "DELIVERY_PREFIX", "first_time", "forget_deliveries"]

DELIVERY_PREFIX = "delivery:"
DELIVERY_KEEP = timedelta(days=1)
"""How long a delivery's key is kept: far beyond Slack's retries and the 5-minute signature window."""


def first_time(store: Store, key: str, *, actor: str) -> bool:
    """Record `key`; False when it was recorded before (by anyone, in any process)."""
    with Session(store.engine) as session:
        session.add(SeenKey(key=key[:200], actor=actor[:64]))
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
            return False
    return True


def forget_deliveries(store: Store, *, now: datetime | None = None) -> int:
    """Drop the delivery keys older than DELIVERY_KEEP (never a button's); how many went."""
    cutoff = (now or utcnow()) - DELIVERY_KEEP
    with Session(store.engine) as session:
        result = session.exec(
            delete(SeenKey).where(
                col(SeenKey.key).startswith(DELIVERY_PREFIX, autoescape=True), col(SeenKey.seen_at) < cutoff
            )
        )
        session.commit()
    return int(result.rowcount or 0)
