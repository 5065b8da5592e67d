"""Evidence (what steps showed) and the audit trail (who did what to which target)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from bot.store.loop_models import AuditEvent, EvidenceRecord
from bot.store.store import Store

__all__ = ["add_evidence", "audit", "audit_events", "evidence_of"]


def add_evidence(
    store: Store,
    *,
    target: str,
    kind: str,
    title: str,
    data: Mapping[str, Any],
    experiment_id: int | None = None,
    investigation_id: int | None = None,
    step_index: int | None = None,
) -> EvidenceRecord:
    """Store one piece of evidence (JSON-able `data`), of an experiment's step or an investigation."""
    row = EvidenceRecord(
        target=target,
        kind=kind,
        title=title,
        data=dict(data),
        experiment_id=experiment_id,
        investigation_id=investigation_id,
        step_index=step_index,
    )
    return store.add(row)


def evidence_of(store: Store, experiment_id: int) -> list[EvidenceRecord]:
    """An experiment's evidence in the order it was emitted."""
    query = (
        select(EvidenceRecord)
        .where(EvidenceRecord.experiment_id == experiment_id)
        .order_by(col(EvidenceRecord.id))
    )
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query).all())


def audit(
    store: Store,
    *,
    actor: str,
    target: str,
    action: str,
    detail: Mapping[str, Any] | None = None,
    experiment_id: int | None = None,
) -> AuditEvent:
    """Append one event to the audit trail."""
    row = AuditEvent(
        actor=actor, target=target, action=action, detail=dict(detail or {}), experiment_id=experiment_id
    )
    return store.add(row)


def audit_events(
    store: Store, target: str, *, since: datetime | None = None, limit: int = 200
) -> list[AuditEvent]:
    """The target's audit events at or after `since`, newest first."""
    query = select(AuditEvent).where(AuditEvent.target == target)
    if since is not None:
        query = query.where(col(AuditEvent.at) >= since)
    query = query.order_by(col(AuditEvent.at).desc(), col(AuditEvent.id).desc()).limit(limit)
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query).all())
