"""What the store has a history of, beyond what flagbot.toml configures today."""

from __future__ import annotations

from sqlmodel import Session, select

from bot.store.loop_models import Experiment
from bot.store.models import Snapshot
from bot.store.store import Store


def stored_targets(store: Store) -> set[str]:
    """Targets the store has experiments or starts of (one removed from flagbot.toml still has a history)."""
    with Session(store.engine) as session:
        names = set(session.exec(select(Experiment.target).distinct()).all())
        names.update(session.exec(select(Snapshot.target).distinct()).all())
    return names
