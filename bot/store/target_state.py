"""Repository functions over what flagbot remembers of a target between runs: its `TargetState`
row (unit checksums, divergence) and its `DropinBackup` rows (backups, the unit as left, the
intended drop-ins); `bot.target.ledger.Ledger` is their one user.

Why `change_target_state` takes a function and not a row: the nodes of a target record their
units concurrently, and a stale row saved by one would undo what the other had just recorded (a
lost checksum then reads as a hand edit on the next change). The row is read, changed and
written in one transaction; on PostgreSQL it is locked (`FOR UPDATE`), SQLite has no row locks
and the store's single writer thread serialises a process's changes.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.models import DropinBackup, TargetState, utcnow
from bot.store.store import Store

__all__ = [
    "change_target_state",
    "dropin_backups",
    "dropin_contents",
    "get_target_state",
    "latest_dropin_content",
]


def get_target_state(store: Store, target: str) -> TargetState:
    """The target's row, or a new unsaved one when flagbot never recorded anything of it."""
    with Session(store.engine, expire_on_commit=False) as session:
        row = session.get(TargetState, target)
        return row if row is not None else TargetState(target=target)


def change_target_state(store: Store, target: str, change: Callable[[TargetState], None]) -> None:
    """Apply `change` to the target's row (created when missing) in one transaction."""
    for attempt in range(2):
        with Session(store.engine, expire_on_commit=False) as session:
            row = session.get(TargetState, target, with_for_update=True)
            if row is None:
                row = TargetState(target=target)
                session.add(row)
            change(row)
            row.updated_at = utcnow()
            try:
                session.commit()
                return
            except IntegrityError:  # another writer created the row first: change theirs
                if attempt:
                    raise


def latest_dropin_content(store: Store, target: str, node: str, reason: str) -> str | None:
    """The content of the node's newest `DropinBackup` with this reason; None when there is none."""
    with Session(store.engine) as session:
        query = (
            select(DropinBackup)
            .where(DropinBackup.target == target, DropinBackup.node == node)
            .where(DropinBackup.reason == reason)
            .order_by(col(DropinBackup.id).desc())
        )
        row = session.exec(query.limit(1)).first()
        return row.content if row is not None else None


def dropin_backups(store: Store, target: str, node: str | None, *, excluding: str) -> list[DropinBackup]:
    """The target's (or one node's) `DropinBackup` rows but those with reason `excluding`, newest first."""
    with Session(store.engine) as session:
        query = select(DropinBackup).where(DropinBackup.target == target, DropinBackup.reason != excluding)
        if node is not None:
            query = query.where(DropinBackup.node == node)
        return list(session.exec(query.order_by(col(DropinBackup.id).desc())).all())


def dropin_contents(store: Store, target: str, reason: str) -> dict[str, str]:
    """node -> the content of its newest `DropinBackup` with this reason."""
    with Session(store.engine) as session:
        query = (
            select(DropinBackup)
            .where(DropinBackup.target == target, DropinBackup.reason == reason)
            .order_by(col(DropinBackup.id))
        )
        return {row.node: row.content for row in session.exec(query).all()}
