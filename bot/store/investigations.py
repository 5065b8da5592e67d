"""Investigations: a question about a target, with the chat thread it is discussed in."""

from __future__ import annotations

from sqlmodel import Session

from bot.store.loop_models import Investigation
from bot.store.store import Store

__all__ = ["get_investigation", "open_investigation"]


def open_investigation(
    store: Store,
    *,
    target: str,
    title: str,
    created_by: str,
    channel: str | None = None,
    thread_ts: str | None = None,
) -> Investigation:
    """A new investigation in status "open"; ValueError when the title is empty."""
    if not title.strip():
        raise ValueError("an investigation needs a title")
    row = Investigation(
        target=target, title=title, created_by=created_by, channel=channel, thread_ts=thread_ts
    )
    return store.add(row)


def get_investigation(store: Store, investigation_id: int) -> Investigation | None:
    with Session(store.engine, expire_on_commit=False) as session:
        return session.get(Investigation, investigation_id)
