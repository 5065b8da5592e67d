"""Drift watch state: a target's current findings, and an event each time they change.

A finding is `{"key": ..., "what": ..., "evidence": [...]}`; the key says what drifted
(`hand-edit:NODE`, `restart`, `capacity`, `throughput`). The state changes when the set of keys
changes, and only then is an event written (and posted): the same drift seen every half hour is
one event, not forty-eight a day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.checks import mark_posted
from bot.store.models import utcnow
from bot.store.schedule_models import DriftEvent, DriftState
from bot.store.store import Store

__all__ = [
    "DriftChange",
    "drift_events",
    "get_drift",
    "record_drift",
    "set_drift_posted",
    "unposted_drift_event",
]


@dataclass(frozen=True)
class DriftChange:
    """What one watch changed: the keys before and now, and the event when they differ."""

    previous: tuple[str, ...]
    current: tuple[str, ...]
    event: DriftEvent | None

    @property
    def changed(self) -> bool:
        return self.event is not None

    @property
    def new(self) -> tuple[str, ...]:
        return tuple(key for key in self.current if key not in self.previous)

    @property
    def resolved(self) -> tuple[str, ...]:
        return tuple(key for key in self.previous if key not in self.current)


def get_drift(store: Store, target: str) -> DriftState | None:
    with Session(store.engine, expire_on_commit=False) as session:
        return session.get(DriftState, target)


def record_drift(
    store: Store,
    target: str,
    *,
    findings: list[dict[str, Any]],
    reference: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> DriftChange:
    """Store a watch's findings (one transaction); an event when the set of keys changed.

    The first watch of a target only records (its findings, if any, are an event too);
    `reference` replaces the stored one when given.

    Why the row lock: during a leader handover two replicas can watch the same target at once
    (the old leader has lost its lock but not yet noticed). Each would read the same previous
    keys and write the same event, posted twice. The state row is read `FOR UPDATE`, so the
    second watch waits for the first to commit and then sees its keys: one event. A watch whose
    look is older than the stored one (`now` before `checked_at`, a stale leader finishing late)
    changes nothing. Two first watches racing to insert the row: the loser reads it and goes on.
    """
    moment = now or utcnow()
    if moment.tzinfo is None:
        raise ValueError("naive datetime for now; use datetime.now(UTC)")
    try:
        return _record_drift(store, target, findings, reference, moment)
    except IntegrityError:  # another watch inserted the first row meanwhile: it exists now, lock it
        return _record_drift(store, target, findings, reference, moment)


def _record_drift(
    store: Store,
    target: str,
    findings: list[dict[str, Any]],
    reference: dict[str, Any] | None,
    moment: datetime,
) -> DriftChange:
    keys = tuple(sorted(str(item["key"]) for item in findings))
    with Session(store.engine, expire_on_commit=False) as session:
        row = session.get(DriftState, target, with_for_update=True)
        previous = tuple(sorted(str(item["key"]) for item in row.findings)) if row is not None else ()
        if row is not None and row.checked_at > moment:
            return DriftChange(previous, previous, None)  # a newer look is already stored
        if row is None:
            row = DriftState(target=target, checked_at=moment, changed_at=moment)
        row.checked_at = moment
        row.findings = list(findings)
        row.state = "drift" if findings else "ok"
        if reference is not None:
            row.reference = dict(reference)
        event = None
        if keys != previous:
            row.changed_at = moment
            event = DriftEvent(
                target=target,
                at=moment,
                state=row.state,
                findings=[item for item in findings if item["key"] not in previous],
                resolved=[key for key in previous if key not in keys],
            )
            session.add(event)
        session.add(row)
        session.commit()
        if event is not None:
            session.refresh(event)
    return DriftChange(previous, keys, event)


def set_drift_posted(store: Store, event_id: int, ts: str) -> None:
    """Remember the message an event was posted as."""
    mark_posted(store, DriftEvent, event_id, ts, "drift event")


def drift_events(store: Store, target: str | None = None, *, limit: int = 50) -> list[DriftEvent]:
    """Changes of drift state, newest first."""
    with Session(store.engine, expire_on_commit=False) as session:
        query = select(DriftEvent)
        if target is not None:
            query = query.where(DriftEvent.target == target)
        return list(session.exec(query.order_by(col(DriftEvent.id).desc()).limit(limit)).all())


def unposted_drift_event(
    store: Store, target: str, *, recorded_before: datetime, recorded_after: datetime
) -> DriftEvent | None:
    """The target's newest event when it was never posted and was recorded between the two
    moments; None otherwise. Only the newest: an older unposted event is superseded by the
    state a newer one describes. Why: a watch that recorded an event and died before posting it
    (a leader SIGKILLed, Slack down) leaves the change of state written and nobody told; the next
    watch sees no change, so without this the event is never posted."""
    newest = next(iter(drift_events(store, target, limit=1)), None)
    if newest is None or newest.posted_ts is not None:
        return None
    return newest if recorded_after <= newest.at <= recorded_before else None
