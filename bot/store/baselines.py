"""Baselines: the start (snapshot, and optionally its benchmark) a target is compared against.

Pinning a new baseline deactivates the previous one in the same transaction; `current_baseline`
is the active one (the newest, should two pins ever race).
"""

from __future__ import annotations

from sqlalchemy import update
from sqlmodel import Session, col, select

from bot.store.loop_models import Baseline
from bot.store.models import MeasurementSet, Snapshot
from bot.store.store import Store

__all__ = ["baselines_of", "current_baseline", "pin_baseline"]


def pin_baseline(
    store: Store,
    *,
    target: str,
    snapshot_id: int,
    set_id: int | None = None,
    note: str = "",
    pinned_by: str,
) -> Baseline:
    """Make this snapshot (and set) the target's active baseline; the previous one stops being active."""
    with Session(store.engine, expire_on_commit=False) as session:
        if session.get(Snapshot, snapshot_id) is None:
            raise LookupError(f"no snapshot #{snapshot_id}")
        if set_id is not None and session.get(MeasurementSet, set_id) is None:
            raise LookupError(f"no measurement set {set_id}")
        session.exec(
            update(Baseline)
            .where(col(Baseline.target) == target, col(Baseline.active).is_(True))
            .values(active=False)
        )
        row = Baseline(target=target, snapshot_id=snapshot_id, set_id=set_id, note=note, pinned_by=pinned_by)
        session.add(row)
        session.commit()
        session.refresh(row)
        return row


def current_baseline(store: Store, target: str) -> Baseline | None:
    """The target's active baseline; None when none was pinned."""
    query = (
        select(Baseline)
        .where(Baseline.target == target, col(Baseline.active).is_(True))
        .order_by(col(Baseline.id).desc())
        .limit(1)
    )
    with Session(store.engine, expire_on_commit=False) as session:
        return session.exec(query).first()


def baselines_of(store: Store, target: str) -> list[Baseline]:
    """Every baseline pinned on `target`, active or not (old pins stay as history)."""
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(select(Baseline).where(Baseline.target == target)).all())
