"""Hypotheses: statements about a target that experiments test, and how they were resolved."""

from __future__ import annotations

from collections.abc import Iterable

from sqlmodel import Session, col, select

from bot.store.loop_models import HYPOTHESIS_STATUSES, Experiment, Hypothesis
from bot.store.models import utcnow
from bot.store.store import Store

__all__ = [
    "add_hypothesis",
    "experiments_of",
    "get_hypothesis",
    "list_hypotheses",
    "resolve_hypothesis",
]


def _check_status(status: str) -> None:
    if status not in HYPOTHESIS_STATUSES:
        raise ValueError(f"unknown hypothesis status {status!r}; one of: {', '.join(HYPOTHESIS_STATUSES)}")


def add_hypothesis(
    store: Store,
    *,
    target: str,
    statement: str,
    variable: str | None = None,
    expectations: Iterable[str] = (),
    because: str | None = None,
    created_by: str,
    investigation_id: int | None = None,
) -> Hypothesis:
    """A new open hypothesis; ValueError when the statement is empty."""
    if not statement.strip():
        raise ValueError("a hypothesis needs a statement")
    row = Hypothesis(
        target=target,
        statement=statement,
        variable=variable,
        expectations=list(expectations),
        because=because,
        created_by=created_by,
        investigation_id=investigation_id,
    )
    return store.add(row)


def get_hypothesis(store: Store, hypothesis_id: int) -> Hypothesis | None:
    with Session(store.engine, expire_on_commit=False) as session:
        return session.get(Hypothesis, hypothesis_id)


def list_hypotheses(store: Store, target: str, *, status: str | None = None) -> list[Hypothesis]:
    """The target's hypotheses (optionally in one status), newest first."""
    query = select(Hypothesis).where(Hypothesis.target == target)
    if status is not None:
        _check_status(status)
        query = query.where(Hypothesis.status == status)
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query.order_by(col(Hypothesis.id).desc())).all())


def resolve_hypothesis(
    store: Store, hypothesis_id: int, *, status: str, because: str | None = None
) -> Hypothesis:
    """Set the status (open, confirmed, refuted, inconclusive) and, when given, the reason.

    resolved_at is set for any status but "open" (re-opening clears it).
    """
    _check_status(status)
    with Session(store.engine, expire_on_commit=False) as session:
        row = session.get(Hypothesis, hypothesis_id)
        if row is None:
            raise LookupError(f"no hypothesis #{hypothesis_id}")
        row.status = status
        if because is not None:
            row.because = because
        row.resolved_at = None if status == "open" else utcnow()
        session.add(row)
        session.commit()
        session.refresh(row)
        return row


def experiments_of(store: Store, hypothesis_id: int) -> list[Experiment]:
    """The experiments that tested a hypothesis, oldest first."""
    query = select(Experiment).where(Experiment.hypothesis_id == hypothesis_id).order_by(col(Experiment.id))
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query).all())
