"""The drift state during a leader handover (issue 25): two replicas watching one target at once
write one event, and a stale leader's late look changes nothing.

The overlap is made deterministic on PostgreSQL: the test itself plays the first watch, holding
its transaction open on the state row, while the second runs `record_drift` in a thread; the
test commits only once the database shows the second waiting on that row's lock."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlmodel import Session

from bot.store import Store
from bot.store.drift import DriftChange, drift_events, get_drift, record_drift
from bot.store.schedule_models import DriftEvent, DriftState
from tests.support.schedule import T0, migrated_store
from tests.support.waits import until

EDIT = {"key": "hand-edit:node1", "what": "edited", "evidence": []}
RESTART = {"key": "restart", "what": "restarted", "evidence": []}


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    opened = migrated_store(request.param, tmp_path, url)
    yield opened
    opened.close()


@pytest.fixture
def postgres_store(postgres_url: str, tmp_path: Path) -> Iterator[Store]:
    opened = migrated_store("postgresql", tmp_path, postgres_url)
    yield opened
    opened.close()


def _waiting_on_a_lock(store: Store) -> bool:
    with store.engine.connect() as connection:
        waiting = connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        ).scalar_one()
    return int(waiting) > 0


async def test_two_watches_at_once_write_one_event(postgres_store: Store) -> None:
    store = postgres_store
    record_drift(store, "lab", findings=[], reference={"invocation": "a"}, now=T0)
    second: dict[str, Any] = {}

    def second_watch() -> None:
        try:
            second["change"] = record_drift(store, "lab", findings=[EDIT], now=T0 + timedelta(minutes=31))
        except BaseException as exc:  # reported to the test below
            second["error"] = exc

    with Session(store.engine, expire_on_commit=False) as first:
        row = first.get(DriftState, "lab", with_for_update=True)  # the first watch, mid-transaction
        assert row is not None
        row.findings = [EDIT]
        row.state = "drift"
        row.checked_at = row.changed_at = T0 + timedelta(minutes=30)
        first.add(DriftEvent(target="lab", at=row.changed_at, state="drift", findings=[EDIT], resolved=[]))
        first.add(row)
        thread = threading.Thread(target=second_watch)
        thread.start()
        try:
            await until(
                lambda: _waiting_on_a_lock(store) or "change" in second or "error" in second,
                "the second watch to wait for the first's row lock",
            )
            first.commit()
        finally:
            thread.join(timeout=30)
    assert "error" not in second, second.get("error")
    change: DriftChange = second["change"]
    assert change.previous == ("hand-edit:node1",) and not change.changed  # it saw the first's keys
    assert len(drift_events(store, "lab")) == 1


def test_a_stale_look_changes_nothing(store: Store) -> None:
    record_drift(store, "lab", findings=[EDIT], reference={"invocation": "a"}, now=T0 + timedelta(minutes=60))
    late = record_drift(
        store, "lab", findings=[RESTART], reference={"invocation": "b"}, now=T0 + timedelta(minutes=30)
    )
    assert not late.changed and late.current == ("hand-edit:node1",)
    state = get_drift(store, "lab")
    assert state is not None
    assert [item["key"] for item in state.findings] == ["hand-edit:node1"]
    assert state.reference == {"invocation": "a"} and state.checked_at == T0 + timedelta(minutes=60)
    assert len(drift_events(store, "lab")) == 1
