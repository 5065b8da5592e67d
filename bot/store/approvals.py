"""Approval requests: create one, read it, decide it exactly once (approved, denied, expired)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import update
from sqlmodel import Session, col

from bot.store.models import utcnow
from bot.store.slack_models import ApprovalRequest
from bot.store.store import Store

__all__ = ["create_request", "decide_request", "get_request", "set_card"]


def create_request(
    store: Store,
    *,
    target: str,
    command: str,
    requester: str,
    channel: str,
    needs: str,
    expires_in: timedelta,
    now: datetime | None = None,
) -> ApprovalRequest:
    if needs not in ("approval", "confirmation"):
        raise ValueError(f"needs must be approval or confirmation, not {needs!r}")
    start = now or utcnow()
    row = ApprovalRequest(
        target=target,
        command=command,
        requester=requester,
        channel=channel,
        needs=needs,
        created_at=start,
        expires_at=start + expires_in,
    )
    with Session(store.engine, expire_on_commit=False) as session:
        session.add(row)
        session.commit()
        session.refresh(row)
    return row


def get_request(store: Store, request_id: int) -> ApprovalRequest | None:
    with Session(store.engine, expire_on_commit=False) as session:
        return session.get(ApprovalRequest, request_id)


def set_card(store: Store, request_id: int, card_ts: str) -> None:
    with Session(store.engine) as session:
        session.exec(
            update(ApprovalRequest).where(col(ApprovalRequest.id) == request_id).values(card_ts=card_ts)
        )
        session.commit()


def decide_request(
    store: Store, request_id: int, *, status: str, by: str, now: datetime | None = None
) -> ApprovalRequest | None:
    """Approve or deny a pending, unexpired request; None when it was already decided or expired
    (one conditional UPDATE: of two clicks at once, exactly one wins)."""
    if status not in ("approved", "denied"):
        raise ValueError(f"a decision is approved or denied, not {status!r}")
    moment = now or utcnow()
    with Session(store.engine, expire_on_commit=False) as session:
        result = session.exec(
            update(ApprovalRequest)
            .where(
                col(ApprovalRequest.id) == request_id,
                col(ApprovalRequest.status) == "pending",
                col(ApprovalRequest.expires_at) > moment,
            )
            .values(status=status, decided_by=by, decided_at=moment)
        )
        session.commit()
        if result.rowcount != 1:
            row = session.get(ApprovalRequest, request_id)
            if row is not None and row.status == "pending" and row.expires_at <= moment:
                session.exec(
                    update(ApprovalRequest)
                    .where(col(ApprovalRequest.id) == request_id, col(ApprovalRequest.status) == "pending")
                    .values(status="expired")
                )
                session.commit()
            return None
        return session.get(ApprovalRequest, request_id)
