"""Verification checks: add, read, pause / resume / delete, and record a run exactly once.

Why a check's state lives with its experiment: a check confirms what an experiment concluded,
and an experiment has several checks (10 min, 24 h). The state a run is compared with is the
latest pass/fail of any check of the same experiment, starting at `pass` (the conclusion
itself), so "posts only on a change" means pass -> fail or fail -> pass across all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete
from sqlmodel import Session, col, select

from bot.store.models import utcnow
from bot.store.schedule_models import (
    CHECK_RESULTS,
    CHECK_STATES,
    CHECK_STATUSES,
    CheckRun,
    DriftEvent,
    VerificationCheck,
)
from bot.store.store import Store

__all__ = [
    "RecordedRun",
    "add_check",
    "check_runs",
    "delete_check",
    "failed_checks_between",
    "get_check",
    "list_checks",
    "record_check_run",
    "set_check_status",
    "set_posted",
    "unposted_check_runs",
]


@dataclass(frozen=True)
class RecordedRun:
    """A stored run and the state it is compared with; `changed` says whether to post it."""

    run: CheckRun
    previous: str
    state: str

    @property
    def changed(self) -> bool:
        return self.previous != self.state


def _aware(value: datetime, what: str) -> datetime:
    if value.tzinfo is None:
        raise ValueError(f"naive datetime for {what}; use datetime.now(UTC)")
    return value


def add_check(
    store: Store,
    *,
    target: str,
    experiment_id: int | None,
    after: timedelta,
    due_at: datetime,
    expected: dict[str, Any],
    created_by: str,
    profile: str | None = None,
    channel: str | None = None,
    thread_ts: str | None = None,
) -> VerificationCheck:
    """A new check in status `scheduled`; ValueError for a negative delay or a naive time."""
    if after < timedelta(0):
        raise ValueError(f"a check runs after the experiment, not {after} before it")
    row = VerificationCheck(
        target=target,
        experiment_id=experiment_id,
        after_s=after.total_seconds(),
        due_at=_aware(due_at, "due_at"),
        expected=dict(expected),
        created_by=created_by,
        profile=profile,
        channel=channel,
        thread_ts=thread_ts,
    )
    return store.add(row)


def get_check(store: Store, check_id: int) -> VerificationCheck | None:
    with Session(store.engine, expire_on_commit=False) as session:
        return session.get(VerificationCheck, check_id)


def _need(session: Session, check_id: int) -> VerificationCheck:
    row = session.get(VerificationCheck, check_id)
    if row is None:
        raise LookupError(f"no check #{check_id}")
    return row


def list_checks(
    store: Store, target: str | None = None, *, statuses: Sequence[str] | None = None, limit: int = 200
) -> list[VerificationCheck]:
    """Checks by due time (the next to run first), of one target or all."""
    with Session(store.engine, expire_on_commit=False) as session:
        query = select(VerificationCheck)
        if target is not None:
            query = query.where(VerificationCheck.target == target)
        if statuses is not None:
            query = query.where(col(VerificationCheck.status).in_(list(statuses)))
        query = query.order_by(col(VerificationCheck.due_at), col(VerificationCheck.id)).limit(limit)
        return list(session.exec(query).all())


def set_check_status(store: Store, check_id: int, status: str) -> VerificationCheck:
    """Pause (`paused`) or resume (`scheduled`) a check; LookupError for an unknown id."""
    if status not in CHECK_STATUSES:
        raise ValueError(f"check status {status!r}; one of {', '.join(CHECK_STATUSES)}")
    with Session(store.engine, expire_on_commit=False) as session:
        row = _need(session, check_id)
        row.status = status
        session.add(row)
        session.commit()
        session.refresh(row)
        return row


def delete_check(store: Store, check_id: int) -> VerificationCheck:
    """Remove a check and its runs; returns the row as it was. LookupError for an unknown id."""
    with Session(store.engine, expire_on_commit=False) as session:
        row = _need(session, check_id)
        session.exec(delete(CheckRun).where(col(CheckRun.check_id) == check_id))
        session.delete(row)
        session.commit()
        return row


def _previous_state(session: Session, check: VerificationCheck) -> str:
    query = select(CheckRun).where(col(CheckRun.result).in_(list(CHECK_STATES)))
    if check.experiment_id is not None:
        query = query.where(CheckRun.experiment_id == check.experiment_id)
    else:
        query = query.where(CheckRun.check_id == check.id)
    last = session.exec(query.order_by(col(CheckRun.id).desc()).limit(1)).first()
    return last.result if last is not None else "pass"


def record_check_run(
    store: Store,
    check_id: int,
    *,
    result: str,
    summary: str,
    detail: dict[str, Any] | None = None,
    trigger: str = "schedule",
    snapshot_id: int | None = None,
    set_id: int | None = None,
    ran_at: datetime | None = None,
    done: bool = True,
) -> RecordedRun:
    """Store one run and update its check, in one transaction; the state it changes from.

    `error` and `busy` results are recorded but keep the state. `done` marks a scheduled check
    as run (a `run now` of a check still due leaves it scheduled).
    """
    if result not in CHECK_RESULTS:
        raise ValueError(f"check result {result!r}; one of {', '.join(CHECK_RESULTS)}")
    moment = _aware(ran_at, "ran_at") if ran_at is not None else utcnow()
    with Session(store.engine, expire_on_commit=False) as session:
        check = _need(session, check_id)
        previous = _previous_state(session, check)
        run = CheckRun(
            check_id=check_id,
            experiment_id=check.experiment_id,
            target=check.target,
            ran_at=moment,
            trigger=trigger,
            result=result,
            previous_state=previous,
            summary=summary,
            detail=dict(detail or {}),
            snapshot_id=snapshot_id,
            set_id=set_id,
        )
        session.add(run)
        check.runs += 1
        check.last_run_at = moment
        check.last_result = result
        check.last_summary = summary
        if done and check.status == "scheduled":
            check.status = "done"
        session.add(check)
        session.commit()
        session.refresh(run)
    state = result if result in CHECK_STATES else previous
    return RecordedRun(run, previous, state)


def unposted_check_runs(
    store: Store, *, recorded_before: datetime, recorded_after: datetime
) -> list[CheckRun]:
    """Runs that changed their check's state, were never posted, and ran between the two moments,
    oldest first. Why: a check that recorded its run and died before posting it (a leader
    SIGKILLed, Slack down) leaves the change written and the experiment's thread untold; the
    check is done, so nothing would ever run it again."""
    with Session(store.engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(CheckRun)
            .where(
                col(CheckRun.result).in_(list(CHECK_STATES)),
                col(CheckRun.result) != col(CheckRun.previous_state),
                col(CheckRun.posted_ts).is_(None),
                col(CheckRun.ran_at) >= recorded_after,
                col(CheckRun.ran_at) <= recorded_before,
            )
            .order_by(col(CheckRun.id))
        ).all()
    return list(rows)


def set_posted(store: Store, run_id: int, ts: str) -> None:
    """Remember the message a run was posted as (the thread reply's ts)."""
    mark_posted(store, CheckRun, run_id, ts, "check run")


def mark_posted(
    store: Store, model: type[CheckRun] | type[DriftEvent], row_id: int, ts: str, what: str
) -> None:
    """Set `posted_ts` of one row (a check run or a drift event); LookupError naming `what`."""
    with Session(store.engine) as session:
        row = session.get(model, row_id)
        if row is None:
            raise LookupError(f"no {what} #{row_id}")
        row.posted_ts = ts
        session.add(row)
        session.commit()


def check_runs(store: Store, check_id: int, *, limit: int = 50) -> list[CheckRun]:
    """A check's runs, newest first."""
    with Session(store.engine, expire_on_commit=False) as session:
        query = select(CheckRun).where(CheckRun.check_id == check_id).order_by(col(CheckRun.id).desc())
        return list(session.exec(query.limit(limit)).all())


def failed_checks_between(store: Store, start: datetime, end: datetime) -> list[CheckRun]:
    """Runs that failed in [start, end), oldest first (the weekly digest's "checks that failed")."""
    with Session(store.engine, expire_on_commit=False) as session:
        query = (
            select(CheckRun)
            .where(CheckRun.result == "fail")
            .where(col(CheckRun.ran_at) >= _aware(start, "start"), col(CheckRun.ran_at) < _aware(end, "end"))
            .order_by(col(CheckRun.ran_at), col(CheckRun.id))
        )
        return list(session.exec(query).all())
