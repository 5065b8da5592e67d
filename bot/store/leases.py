"""Leases: who may change a target right now, across processes and hosts.

One row per target (the primary key), kept alive by heartbeats. `acquire` inserts the row; when
the insert hits the primary key it reads the holder's row and, if that lease has expired (its
last heartbeat is older than its own `ttl_s`), takes it over with a conditional UPDATE that
names the old holder and heartbeat: whoever changes one row wins, everyone else retries or sees
`LeaseHeld`. The same on SQLite and PostgreSQL, without table locks.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.lease_queue import WaiterInfo
from bot.store.loop_models import Lease
from bot.store.models import utcnow
from bot.store.store import Store

__all__ = [
    "Acquired",
    "LeaseHeld",
    "LeaseInfo",
    "QueueAhead",
    "WaitCancelled",
    "acquire",
    "attach_experiment",
    "current",
    "expired_leases",
    "heartbeat",
    "release",
]

_ATTEMPTS = 5


@dataclass(frozen=True)
class LeaseInfo:
    """A lease as read from the store (a plain value, safe to pass between threads)."""

    target: str
    holder: str
    host: str
    pid: int
    purpose: str
    experiment_id: int | None
    acquired_at: datetime
    heartbeat_at: datetime
    ttl_s: float

    @classmethod
    def of(cls, row: Lease) -> LeaseInfo:
        return cls(**{field.name: getattr(row, field.name) for field in fields(cls)})

    def expired(self, now: datetime | None = None) -> bool:
        """True when the last heartbeat is more than `ttl_s` seconds before `now`."""
        return self.heartbeat_at < (now or utcnow()) - timedelta(seconds=self.ttl_s)

    def describe(self, now: datetime | None = None) -> str:
        """E.g. "held by cli:alice@laptop on laptop (pid 4242) for experiment #7 (try) since
        2026-11-29 22:40:01 UTC, last heartbeat 3 s ago"."""
        ago = max(0, round(((now or utcnow()) - self.heartbeat_at).total_seconds()))
        purpose = (
            f"experiment #{self.experiment_id} ({self.purpose})"
            if self.experiment_id is not None
            else self.purpose
        )
        since = self.acquired_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return (
            f"held by {self.holder} on {self.host} (pid {self.pid}) for {purpose} since {since}, "
            f"last heartbeat {ago} s ago"
        )


class LeaseHeld(Exception):  # noqa: N818  (the name is the contract of docs/loop.md)
    """The target's lease belongs to someone else and has not expired; `.lease` says whose."""

    def __init__(self, lease: LeaseInfo, now: datetime | None = None) -> None:
        super().__init__(f"{lease.target} is busy: {lease.describe(now)}")
        self.lease = lease
        self.queued_as: int | None = None
        """The waiter id of the command that waits for this lease (`wait=`), for `cancel waiter=`."""


class QueueAhead(LeaseHeld):
    """The lease may be free, but commands are queued for it (`wait=`): whoever does not wait is
    refused like a busy lease, naming the queue, so nobody jumps it. `.lease` is the first
    waiter's, as a lease (who, for what, since when), so every LeaseHeld reader still reads it."""

    def __init__(self, target: str, queue: list[WaiterInfo]) -> None:
        first = queue[0]
        super().__init__(
            LeaseInfo(
                target=target,
                holder=first.holder,
                host="",
                pid=0,
                purpose=first.purpose,
                experiment_id=None,
                acquired_at=first.created_at,
                heartbeat_at=first.seen_at,
                ttl_s=0.0,
            )
        )
        self.queue = queue
        names = "; ".join(waiter.describe() for waiter in queue)
        self.args = (
            f"{target} has {len(queue)} command(s) waiting for it (first in line goes first): {names}",
        )


class WaitCancelled(Exception):  # noqa: N818  (said beside LeaseHeld, which it ends like)
    """A command waiting for the lease (`wait=`) was cancelled (`cancel waiter=ID`): it ends
    without having written anything."""

    def __init__(self, waiter: WaiterInfo | None, waiter_id: int) -> None:
        by = f" by {waiter.cancelled_by}" if waiter is not None and waiter.cancelled_by else ""
        what = f" ({waiter.purpose} on {waiter.target})" if waiter is not None else ""
        super().__init__(f"waiter {waiter_id}{what} was cancelled{by} while it waited; nothing was run")
        self.waiter_id = waiter_id


@dataclass(frozen=True)
class Acquired:
    """The lease now held, and the expired lease it replaced (None when the target was free)."""

    lease: LeaseInfo
    taken_over: LeaseInfo | None


def acquire(
    store: Store,
    target: str,
    *,
    holder: str,
    host: str,
    pid: int,
    purpose: str,
    experiment_id: int | None = None,
    ttl_s: float = 60.0,
    now: datetime | None = None,
) -> Acquired:
    """Take the target's lease, or take over an expired one; raise LeaseHeld when it is busy.

    Re-acquiring a lease this holder already has counts as a heartbeat (and attaches
    `experiment_id` when given); `taken_over` is then None.
    """
    if ttl_s <= 0:
        raise ValueError(f"lease ttl must be positive, got {ttl_s}")
    for _ in range(_ATTEMPTS):
        at = now or utcnow()
        values: dict[str, Any] = {
            "holder": holder,
            "host": host,
            "pid": pid,
            "purpose": purpose,
            "experiment_id": experiment_id,
            "acquired_at": at,
            "heartbeat_at": at,
            "ttl_s": ttl_s,
        }
        row = Lease(target=target, **values)
        with Session(store.engine, expire_on_commit=False) as session:
            session.add(row)
            try:
                session.commit()
            except IntegrityError:
                session.rollback()
            else:
                return Acquired(LeaseInfo.of(row), None)

        existing = current(store, target)
        if existing is None:  # released between our insert and our read: insert again
            continue
        if existing.holder == holder:
            renewed = _renew(store, existing, at, experiment_id)
            if renewed is not None:
                return Acquired(renewed, None)
            continue
        if not existing.expired(at):
            raise LeaseHeld(existing, at)
        with Session(store.engine, expire_on_commit=False) as session:
            taken = session.exec(
                update(Lease)
                .where(
                    col(Lease.target) == target,
                    col(Lease.holder) == existing.holder,
                    col(Lease.heartbeat_at) == existing.heartbeat_at,
                )
                .values(**values)
            )
            session.commit()
        if taken.rowcount == 1:
            return Acquired(LeaseInfo.of(row), existing)
        # someone else took it over or its holder heartbeated first: look again
    final = current(store, target)
    if final is not None and final.holder != holder:
        raise LeaseHeld(final, now)
    raise RuntimeError(f"could not acquire the lease of {target} after {_ATTEMPTS} attempts")


def _renew(store: Store, lease: LeaseInfo, at: datetime, experiment_id: int | None) -> LeaseInfo | None:
    values: dict[str, object] = {"heartbeat_at": at}
    if experiment_id is not None:
        values["experiment_id"] = experiment_id
    with Session(store.engine, expire_on_commit=False) as session:
        result = session.exec(
            update(Lease)
            .where(col(Lease.target) == lease.target, col(Lease.holder) == lease.holder)
            .values(**values)
        )
        session.commit()
    if result.rowcount != 1:
        return None
    return current(store, lease.target)


def heartbeat(store: Store, target: str, *, holder: str, now: datetime | None = None) -> bool:
    """Keep our lease alive; False when it is no longer ours (taken over or released)."""
    with Session(store.engine, expire_on_commit=False) as session:
        result = session.exec(
            update(Lease)
            .where(col(Lease.target) == target, col(Lease.holder) == holder)
            .values(heartbeat_at=now or utcnow())
        )
        session.commit()
    return result.rowcount == 1


def attach_experiment(store: Store, target: str, *, holder: str, experiment_id: int) -> None:
    """Record which experiment our lease is for; LookupError when the lease is not ours."""
    with Session(store.engine, expire_on_commit=False) as session:
        result = session.exec(
            update(Lease)
            .where(col(Lease.target) == target, col(Lease.holder) == holder)
            .values(experiment_id=experiment_id)
        )
        session.commit()
    if result.rowcount != 1:
        raise LookupError(f"{holder} does not hold the lease of {target}")


def release(store: Store, target: str, *, holder: str) -> bool:
    """Give the lease up; False when it was not ours (already taken over or released)."""
    with Session(store.engine, expire_on_commit=False) as session:
        result = session.exec(delete(Lease).where(col(Lease.target) == target, col(Lease.holder) == holder))
        session.commit()
    return result.rowcount == 1


def current(store: Store, target: str) -> LeaseInfo | None:
    """The target's lease, expired or not; None when nobody holds it."""
    with Session(store.engine, expire_on_commit=False) as session:
        row = session.get(Lease, target)
        return None if row is None else LeaseInfo.of(row)


def expired_leases(store: Store, *, now: datetime | None = None) -> list[LeaseInfo]:
    """Every lease whose holder stopped heartbeating (each judged by its own ttl), by target."""
    at = now or utcnow()
    with Session(store.engine, expire_on_commit=False) as session:
        rows = session.exec(select(Lease).order_by(col(Lease.target))).all()
    leases = [LeaseInfo.of(row) for row in rows]
    return [lease for lease in leases if lease.expired(at)]
