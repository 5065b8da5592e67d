"""Repository functions over snapshots and the target's known-good pointer.

Why here: the loop's steps, Slack and the drift watch all read a snapshot by id, and rollback
reads the known-good one; the queries live with the tables (`Store.latest_snapshot` and
`Store.snapshots` list a target's) so no other package opens a session.
"""

from __future__ import annotations

from sqlmodel import Session

from bot.store.models import Snapshot, TargetState, utcnow
from bot.store.store import Store

__all__ = ["get_snapshot", "known_good", "set_known_good"]


def get_snapshot(store: Store, snapshot_id: int | None) -> Snapshot | None:
    """The snapshot with this id; None for no id or an unknown one."""
    if snapshot_id is None:
        return None
    with Session(store.engine, expire_on_commit=False) as session:
        return session.get(Snapshot, snapshot_id)


def set_known_good(store: Store, target: str, snapshot_id: int) -> None:
    """Point the target's known-good configuration at this snapshot."""
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
