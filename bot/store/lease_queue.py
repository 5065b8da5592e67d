"""The queue of commands waiting for a busy target (`wait=`): one `lease_waiter` row each.

Why a table and not just polling the lease: without it a released lease went to whichever waiter
polled first, a command that did not wait could take it between two polls, and a waiting
command had no id that `cancel` could name. Here a waiter takes the lease only when it is the
oldest *live* waiter of its target (not cancelled, deadline not passed, and seen at its last
poll recently enough: a waiter whose process died stops blocking the queue by itself), and
`bot.loop.lease_guard.hold_lease` refuses a command that does not wait while one is queued.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, update
from sqlmodel import Session, col, select

from bot.store.loop_models import LeaseWaiter
from bot.store.models import utcnow
from bot.store.store import Store

__all__ = [
    "QueueTurn",
    "WaiterInfo",
    "cancel_waiter",
    "get_waiter",
    "join_queue",
    "leave_queue",
    "live_waiters",
    "poll_queue",
]


@dataclass(frozen=True)
class WaiterInfo:
    """A waiting command as read from the store (a plain value, safe to pass between threads)."""

    id: int
    target: str
    holder: str
    purpose: str
    requested_by: str
    command: str
    created_at: datetime
    seen_at: datetime
    deadline: datetime
    cancelled_at: datetime | None
    cancelled_by: str | None

    @classmethod
    def of(cls, row: LeaseWaiter) -> WaiterInfo:
        return cls(**{field.name: getattr(row, field.name) for field in fields(cls)})

    def live(self, now: datetime, stale_after_s: float) -> bool:
        """Not cancelled, its deadline not passed, and seen within `stale_after_s`."""
        return (
            self.cancelled_at is None
            and self.deadline > now
            and self.seen_at >= now - timedelta(seconds=stale_after_s)
        )

    def describe(self) -> str:
        """E.g. "waiter 3: try by slack:U1 (`try --x=1 wait=30m`), waiting since 10:40 UTC, until 11:10 UTC"."""
        what = f"{self.purpose} by {self.requested_by}"
        if self.command:
            what += f" (`{self.command}`)"
        since = self.created_at.astimezone(UTC).strftime("%H:%M")
        until = self.deadline.astimezone(UTC).strftime("%H:%M")
        return f"waiter {self.id}: {what}, waiting since {since} UTC, until {until} UTC"


@dataclass(frozen=True)
class QueueTurn:
    """What one poll of a waiter found: whether it was cancelled (or its row is gone), and the
    live waiters ahead of it (empty: it is first in line)."""

    waiter: WaiterInfo | None
    ahead: list[WaiterInfo]

    @property
    def cancelled(self) -> bool:
        return self.waiter is None or self.waiter.cancelled_at is not None


def join_queue(
    store: Store,
    target: str,
    *,
    holder: str,
    purpose: str,
    requested_by: str,
    command: str,
    deadline: datetime,
    now: datetime | None = None,
) -> WaiterInfo:
    """Put a waiting command at the end of `target`'s queue."""
    at = now or utcnow()
    row = LeaseWaiter(
        target=target,
        holder=holder,
        purpose=purpose,
        requested_by=requested_by,
        command=command,
        created_at=at,
        seen_at=at,
        deadline=deadline,
    )
    with Session(store.engine, expire_on_commit=False) as session:
        session.add(row)
        session.commit()
    return WaiterInfo.of(row)


def poll_queue(
    store: Store, waiter_id: int, *, stale_after_s: float, now: datetime | None = None
) -> QueueTurn:
    """Mark the waiter seen now and say where it stands (a cancelled one is not refreshed)."""
    at = now or utcnow()
    with Session(store.engine, expire_on_commit=False) as session:
        session.exec(
            update(LeaseWaiter)
            .where(col(LeaseWaiter.id) == waiter_id, col(LeaseWaiter.cancelled_at).is_(None))
            .values(seen_at=at)
        )
        session.commit()
        row = session.get(LeaseWaiter, waiter_id)
        waiter = None if row is None else WaiterInfo.of(row)
    if waiter is None or waiter.cancelled_at is not None:
        return QueueTurn(waiter, [])
    queue = live_waiters(store, waiter.target, stale_after_s=stale_after_s, now=at)
    return QueueTurn(waiter, [other for other in queue if _order(other) < _order(waiter)])


def leave_queue(store: Store, waiter_id: int) -> None:
    """Remove the waiter (it got the lease, gave up, or noticed it was cancelled)."""
    with Session(store.engine, expire_on_commit=False) as session:
        session.exec(delete(LeaseWaiter).where(col(LeaseWaiter.id) == waiter_id))
        session.commit()


def live_waiters(
    store: Store, target: str | None = None, *, stale_after_s: float, now: datetime | None = None
) -> list[WaiterInfo]:
    """The live waiters of `target` (None: of every target), oldest first."""
    at = now or utcnow()
    query = select(LeaseWaiter).where(col(LeaseWaiter.cancelled_at).is_(None))
    if target is not None:
        query = query.where(col(LeaseWaiter.target) == target)
    with Session(store.engine, expire_on_commit=False) as session:
        rows = session.exec(query).all()
    waiters = [WaiterInfo.of(row) for row in rows]
    return sorted((w for w in waiters if w.live(at, stale_after_s)), key=_order)


def get_waiter(store: Store, waiter_id: int) -> WaiterInfo | None:
    with Session(store.engine, expire_on_commit=False) as session:
        row = session.get(LeaseWaiter, waiter_id)
        return None if row is None else WaiterInfo.of(row)


def cancel_waiter(
    store: Store, waiter_id: int, *, actor: str, now: datetime | None = None
) -> WaiterInfo | None:
    """Mark a waiter cancelled (it notices at its next poll and ends, having written nothing);
    None when there is no such waiter (it already got the lease, gave up or ended)."""
    with Session(store.engine, expire_on_commit=False) as session:
        session.exec(
            update(LeaseWaiter)
            .where(col(LeaseWaiter.id) == waiter_id, col(LeaseWaiter.cancelled_at).is_(None))
            .values(cancelled_at=now or utcnow(), cancelled_by=actor)
        )
        session.commit()
    return get_waiter(store, waiter_id)


def _order(waiter: WaiterInfo) -> tuple[datetime, int]:
    return (waiter.created_at, waiter.id)
