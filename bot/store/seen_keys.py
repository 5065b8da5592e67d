"""Idempotency keys of the Slack layer: `first_time(key)` is True exactly once, across restarts.

Two kinds of keys share the table. A button's nonce (`click:...`) is kept for good: a button
acts once, however late the second click comes. A delivery's key (`delivery:...`: a slash
command's trigger id, an event's id) only has to outlive Slack's redeliveries and a signed
request's replay window (Bolt refuses a request signed more than 5 minutes ago; Slack retries
an event for about an hour), so `forget_deliveries` drops those older than `DELIVERY_KEEP`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from bot.redaction import redact
from bot.store.models import utcnow
from bot.store.slack_models import SeenKey
from bot.store.store import Store

__all__ = ["DELIVERY_KEEP", "DELIVERY_PREFIX", "first_time", "first_times", "forget_deliveries"]

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


def first_times(store: Store, entries: Sequence[tuple[str, str]]) -> list[bool]:
    """`first_time` for several (key, actor) pairs, in order, in two statements: a burst of
    slash commands records its keys in one trip to the store instead of one each. A key given
    twice is first only the first time. The read is its own transaction and the insert another
    (SQLite's WAL refuses a write in a transaction whose read another writer overtook); when
    another process recorded one of the keys in between, the insert fails whole and each key is
    asked on its own with `first_time` (the unique row decides, as always)."""
    if not entries:
        return []
    # redacted as the mapper hook redacts a row `first_time` adds (bot.store.redacted_rows): this
    # insert is Core, which the hook does not see
    keys = [redact(key[:200]) for key, _actor in entries]
    with store.engine.connect() as connection:
        seen = set(
            connection.execute(select(col(SeenKey.key)).where(col(SeenKey.key).in_(set(keys)))).scalars()
        )
    fresh: list[bool] = []
    rows: list[dict[str, object]] = []
    now = utcnow()
    for key, (_key, actor) in zip(keys, entries, strict=True):
        fresh.append(key not in seen)
        if key not in seen:
            seen.add(key)
            rows.append({"key": key, "actor": redact(actor[:64]), "seen_at": now})
    if not rows:
        return fresh
    try:
        with store.engine.begin() as connection:
            connection.execute(insert(SeenKey), rows)
    except IntegrityError:
        return [first_time(store, key, actor=actor) for key, actor in entries]
    return fresh


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
