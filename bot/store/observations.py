"""Knowledge observations: what an experiment taught about a flag, on which GPU and SGLang version."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session, col, select

from bot.store.loop_models import KnowledgeObservation
from bot.store.store import Store

__all__ = [
    "add_observation",
    "get_observation",
    "list_observations",
    "observations_of",
    "retract_observation",
]


def add_observation(
    store: Store,
    *,
    flag: str,
    kind: str,
    text: str,
    target: str,
    gpu_name: str | None = None,
    compute_capability: str | None = None,
    sglang_version: str | None = None,
    experiment_id: int | None = None,
    detail: Mapping[str, Any] | None = None,
) -> KnowledgeObservation:
    """Store one observation about `flag` (e.g. kind "effect", "failure", "note")."""
    row = KnowledgeObservation(
        flag=flag,
        kind=kind,
        text=text,
        target=target,
        gpu_name=gpu_name,
        compute_capability=compute_capability,
        sglang_version=sglang_version,
        experiment_id=experiment_id,
        detail=dict(detail or {}),
    )
    return store.add(row)


def list_observations(
    store: Store, *, flag: str | None = None, since: datetime | None = None, retracted: bool = False
) -> list[KnowledgeObservation]:
    """Observations (of one flag, at or after `since`), newest first; retracted ones only when
    `retracted` (ranking and preflight never cite a retracted fact)."""
    query = select(KnowledgeObservation)
    if not retracted:
        query = query.where(col(KnowledgeObservation.retracted_at).is_(None))
    if flag is not None:
        query = query.where(KnowledgeObservation.flag == flag)
    if since is not None:
        query = query.where(col(KnowledgeObservation.observed_at) >= since)
    query = query.order_by(col(KnowledgeObservation.observed_at).desc(), col(KnowledgeObservation.id).desc())
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query).all())


def observations_of(store: Store, target: str) -> list[KnowledgeObservation]:
    """Every observation made on `target`, oldest first (a target's story reads them in order)."""
    query = (
        select(KnowledgeObservation)
        .where(KnowledgeObservation.target == target)
        .order_by(col(KnowledgeObservation.id))
    )
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query).all())


def get_observation(store: Store, observation_id: int) -> KnowledgeObservation | None:
    with Session(store.engine, expire_on_commit=False) as session:
        return session.get(KnowledgeObservation, observation_id)


def retract_observation(
    store: Store, observation_id: int, *, actor: str, because: str
) -> KnowledgeObservation:
    """Mark one fact retracted (kept, never cited again). LookupError when there is no such fact,
    ValueError when the reason is empty or the fact is already retracted (nothing changes)."""
    if not because.strip():
        raise ValueError('a retraction needs a reason: knowledge forget ID because="..."')
    with Session(store.engine, expire_on_commit=False) as session:
        row = session.get(KnowledgeObservation, observation_id)
        if row is None:
            raise LookupError(f"no knowledge fact #{observation_id}; `knowledge list` shows them")
        if row.retracted_at is not None:
            raise ValueError(
                f"knowledge fact #{observation_id} is already retracted "
                f"(by {row.retracted_by}: {row.retracted_because})"
            )
        row.retracted_at = datetime.now(UTC)
        row.retracted_by = actor
        row.retracted_because = because.strip()
        session.add(row)
        session.commit()
        session.refresh(row)
        return row
