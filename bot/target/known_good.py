"""The target's known-good configuration: the flags of its last healthy snapshot.

Why a pointer and not "the previous drop-in": a drop-in backup says what was written, not
whether the server then became ready and served. Rollback goes back to flags that were seen
healthy (ready line, `/health` 200, no startup error), recorded in `TargetState` (the queries
are the store's: `bot.store.snapshots`).
"""

from __future__ import annotations

from bot.store import Store
from bot.store.models import Snapshot
from bot.store.snapshots import known_good, set_known_good

__all__ = ["known_good", "set_known_good", "store_snapshot"]


def store_snapshot(store: Store, snapshot: Snapshot, healthy: bool) -> Snapshot:
    """Insert the snapshot; a healthy one becomes the target's known-good configuration."""
    snapshot = store.add(snapshot)
    if healthy and snapshot.id is not None:
        set_known_good(store, snapshot.target, snapshot.id)
    return snapshot
