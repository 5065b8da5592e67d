"""Idempotency keys of the Slack layer: `first_time(key)` is True exactly once, across restarts."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from bot.store.slack_models import SeenKey
from bot.store.store import Store

__all__ = ["first_time"]


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
