"""Evidence (what steps showed) and the audit trail (who did what to which target)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from bot.store.loop_models import AuditEvent, EvidenceRecord, Investigation
from bot.store.slack_models import ApprovalRequest
from bot.store.store import Store

__all__ = [
    "FREEZE_ACTION",
    "RESTART_ACTION",
    "UNFREEZE_ACTION",
    "GateFacts",
    "add_evidence",
    "audit",
    "audit_events",
    "evidence_of",
    "gate_facts",
    "latest_freeze_event",
    "restart_times",
    "thread_targets",
]

RESTART_ACTION = "restart"
"""`AuditEvent.action` of one restart of a target's server by flagbot (every rank stopped and
started; `bot.target.restart`): what `policy.max_restarts_per_hour` counts."""
FREEZE_ACTION = "freeze"
UNFREEZE_ACTION = "unfreeze"
"""A `freeze` / `unfreeze` command: the newest of the two on a target is its freeze (`bot.app.freeze`)."""


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


def restart_times(store: Store, target: str, *, since: datetime) -> list[datetime]:
    """When flagbot restarted the target at or after `since`, oldest first (audit events
    `RESTART_ACTION`, whichever command or rollback did it)."""
    query = (
        select(AuditEvent.at)
        .where(AuditEvent.target == target, AuditEvent.action == RESTART_ACTION, col(AuditEvent.at) >= since)
        .order_by(col(AuditEvent.at))
    )
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query).all())


def latest_freeze_event(store: Store, target: str) -> AuditEvent | None:
    """The target's newest `freeze` or `unfreeze` audit event (None: never frozen by command).

    One newest row per action, each read from the end of the (target, action, at) index, then
    the later of the two: a single query over both actions, ordered by time, walks the whole
    time index instead (every command's check, before Slack's acknowledgement)."""
    newest: list[AuditEvent] = []
    with Session(store.engine, expire_on_commit=False) as session:
        for action in (FREEZE_ACTION, UNFREEZE_ACTION):
            query = (
                select(AuditEvent)
                .where(AuditEvent.target == target, AuditEvent.action == action)
                .order_by(col(AuditEvent.at).desc(), col(AuditEvent.id).desc())
                .limit(1)
            )
            newest.extend(session.exec(query).all())
    return max(newest, key=lambda row: (row.at, row.id or 0), default=None)


@dataclass(frozen=True)
class GateFacts:
    """What the store says of a target before a run may change it: its newest freeze or
    unfreeze command (`latest_freeze_event`) and its restarts since a time (`restart_times`)."""

    freeze_event: AuditEvent | None
    restarts: list[datetime]


def gate_facts(store: Store, target: str, *, since: datetime) -> GateFacts:
    """Both facts in one call, so a caller on the event loop (Slack's check before its
    acknowledgement) makes one trip to the store's thread for them instead of two."""
    return GateFacts(latest_freeze_event(store, target), restart_times(store, target, since=since))


def thread_targets(store: Store, channel: str, thread_ts: str, *, action: str) -> set[str]:
    """The targets a Slack thread is about: of the runs recorded in it (audit events `action`
    whose detail names this channel and thread), of an approval request whose card roots it, of
    an investigation discussed in it. Empty for a thread flagbot did not open."""
    detail = col(AuditEvent.detail)
    events = (
        select(AuditEvent.target)
        .where(
            col(AuditEvent.action) == action,
            detail["channel"].as_string() == channel,
            detail["thread_ts"].as_string() == thread_ts,
        )
        .distinct()
    )
    requests = select(ApprovalRequest.target).where(
        col(ApprovalRequest.channel) == channel, col(ApprovalRequest.card_ts) == thread_ts
    )
    investigations = select(Investigation.target).where(
        col(Investigation.channel) == channel, col(Investigation.thread_ts) == thread_ts
    )
    with Session(store.engine, expire_on_commit=False) as session:
        found = {str(t) for query in (events, requests, investigations) for t in session.exec(query).all()}
    return {target for target in found if target}
