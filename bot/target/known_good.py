"""The target's known-good configuration: the flags of its last healthy snapshot.

Why a pointer and not "the previous drop-in": a drop-in backup says what was written, not
whether the server then became ready and served. Rollback goes back to flags that were seen
healthy (ready line, `/health` 200, no startup error), recorded in `TargetState`.
"""

from __future__ import annotations

from sqlmodel import Session

from bot.store import Store
from bot.store.models import Snapshot, TargetState, utcnow


def store_snapshot(store: Store, snapshot: Snapshot, healthy: bool) -> Snapshot:
    """Insert the snapshot; a healthy one becomes the target's known-good configuration."""
    snapshot = store.add(snapshot)
    if healthy and snapshot.id is not None:
        set_known_good(store, snapshot.target, snapshot.id)
    return snapshot


def set_known_good(store: Store, target: str, snapshot_id: int) -> None:
    with Session(store.engine) as session:
        row = session.get(TargetState, target) or TargetState(target=target)
        row.known_good_snapshot_id = snapshot_id
        row.updated_at = utcnow()
        session.add(row)
        session.commit()


def known_good(store: Store, target: str) -> Snapshot | None:
    """The snapshot whose flags are the target's known-good configuration, if there is one."""
    with Session(store.engine) as session:
        row = session.get(TargetState, target)
        if row is None or row.known_good_snapshot_id is None:
            return None
        return session.get(Snapshot, row.known_good_snapshot_id)
