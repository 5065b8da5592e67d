"""Claims of scheduled runs that must happen once across replicas (`scheduled_run`).

Why: APScheduler stores a job's next run time when it *starts* the job, so a leader SIGKILLed in
the middle of the weekly digest leaves a run that no job store holds any more. Claiming the run
here first (one row per job and period) lets the next leader find it unfinished and run it, and
lets any replica see that a period's run already finished and not run it again. Claims are rows
with a primary key: the insert, or a conditional UPDATE naming the previous claimant, is the
whole protocol, the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.store.models import utcnow
from bot.store.schedule_models import ScheduledRun
from bot.store.store import Store

__all__ = ["RunClaim", "claim_run", "finish_run", "get_run", "unfinished_runs"]


@dataclass(frozen=True)
class RunClaim:
    """A claimed run as read from the store (a plain value, safe to pass between threads)."""

    key: str
    job: str
    replica: str
    started_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, row: ScheduledRun) -> RunClaim:
        return cls(**{field.name: getattr(row, field.name) for field in fields(cls)})


def get_run(store: Store, key: str) -> RunClaim | None:
    with Session(store.engine, expire_on_commit=False) as session:
        row = session.get(ScheduledRun, key)
        return None if row is None else RunClaim.of(row)


def claim_run(store: Store, key: str, *, job: str, replica: str, now: datetime | None = None) -> bool:
    """Claim the run `key` for `replica`; False when it already finished (never run it again).

    An unfinished claim of another replica is taken over: only the leader runs scheduled jobs, so
    a claim it did not make belongs to a leader that died or stood down in the middle of it.
    The `started_at` of a taken-over claim is kept: it is the moment the run was due for.
    """
    at = now or utcnow()
    with Session(store.engine, expire_on_commit=False) as session:
        session.add(ScheduledRun(key=key, job=job, replica=replica, started_at=at))
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
        else:
            return True
    existing = get_run(store, key)
    if existing is None or existing.finished_at is not None:
        return False
    if existing.replica == replica:
        return True
    with Session(store.engine, expire_on_commit=False) as session:
        taken = session.exec(
            update(ScheduledRun)
            .where(
                col(ScheduledRun.key) == key,
                col(ScheduledRun.replica) == existing.replica,
                col(ScheduledRun.finished_at).is_(None),
            )
            .values(replica=replica)
        )
        session.commit()
    return taken.rowcount == 1


def finish_run(store: Store, key: str, *, replica: str, now: datetime | None = None) -> bool:
    """Mark `key` done; False when it was not this replica's claim (another took it over)."""
    with Session(store.engine, expire_on_commit=False) as session:
        result = session.exec(
            update(ScheduledRun)
            .where(col(ScheduledRun.key) == key, col(ScheduledRun.replica) == replica)
            .values(finished_at=now or utcnow())
        )
        session.commit()
    return result.rowcount == 1


def unfinished_runs(store: Store, *, job: str, other_than: str) -> list[RunClaim]:
    """The unfinished claims of `job` made by another replica than `other_than`, oldest first."""
    with Session(store.engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(ScheduledRun)
            .where(
                col(ScheduledRun.job) == job,
                col(ScheduledRun.finished_at).is_(None),
                col(ScheduledRun.replica) != other_than,
            )
            .order_by(col(ScheduledRun.started_at))
        ).all()
    return [RunClaim.of(row) for row in rows]
