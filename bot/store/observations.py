"""Knowledge observations: what an experiment taught about a flag, on which GPU and SGLang version."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from bot.store.loop_models import KnowledgeObservation
from bot.store.store import Store

__all__ = ["add_observation", "list_observations", "observations_of"]


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
    store: Store, *, flag: str | None = None, since: datetime | None = None
) -> list[KnowledgeObservation]:
    """Observations (of one flag, at or after `since`), newest first."""
    query = select(KnowledgeObservation)
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
