"""Revision 0006 (checks, their runs, drift state) and its repositories, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text
from sqlmodel import Session

from bot.store import Store
from bot.store.checks import (
    check_runs,
    delete_check,
    failed_checks_between,
    get_check,
    list_checks,
    record_check_run,
    set_check_status,
    set_posted,
)
from bot.store.drift import DriftChange, drift_events, get_drift, record_drift
from bot.store.experiments import create_experiment
from bot.store.migrate import alembic_config
from bot.store.schedule_models import DriftEvent, DriftState
from tests.support.schedule import T0, concluded_check, migrated_store
from tests.support.waits import until


def test_revision_0006_creates_and_drops_only_its_tables(store: Store) -> None:
    from alembic import command

    mine = {"verification_check", "check_run", "drift_state", "drift_event", "apscheduler_jobs"}
    assert mine <= set(inspect(store.engine).get_table_names())
    command.downgrade(alembic_config(store.engine), "0005")
    left = set(inspect(store.engine).get_table_names())
    assert not mine & left and {"experiment", "slack_seen_key"} <= left
    store.upgrade()
    assert mine <= set(inspect(store.engine).get_table_names())


def test_a_check_is_listed_paused_resumed_and_deleted_with_its_runs(store: Store) -> None:
    check = concluded_check(store)
    assert check.id is not None and check.status == "scheduled" and check.due_at == T0
    later = concluded_check(store, due_at=T0 + timedelta(hours=24))
    assert [c.id for c in list_checks(store)] == [check.id, later.id]
    assert set_check_status(store, check.id, "paused").status == "paused"
    assert [c.id for c in list_checks(store, statuses=("scheduled",))] == [later.id]
    with pytest.raises(ValueError, match="one of scheduled, paused, done"):
        set_check_status(store, check.id, "sleeping")
    record_check_run(store, check.id, result="pass", summary="ok", ran_at=T0)
    delete_check(store, check.id)
    assert get_check(store, check.id) is None and check_runs(store, check.id) == []
    with pytest.raises(LookupError, match=f"no check #{check.id}"):
        delete_check(store, check.id)


def test_the_state_starts_at_pass_and_only_pass_or_fail_change_it(store: Store) -> None:
    first = concluded_check(store)
    assert first.id is not None
    ran = record_check_run(store, first.id, result="pass", summary="holds", ran_at=T0)
    assert (ran.previous, ran.state, ran.changed) == ("pass", "pass", False)
    assert get_check(store, first.id).status == "done"  # type: ignore[union-attr]
    failed = record_check_run(
        store,
        first.id,
        result="fail",
        summary="48 -> 26",
        trigger="manual",
        done=False,
        ran_at=T0 + timedelta(hours=1),
    )
    assert (failed.previous, failed.state, failed.changed) == ("pass", "fail", True)
    busy = record_check_run(
        store, first.id, result="busy", summary="held by bob", ran_at=T0 + timedelta(hours=2)
    )
    assert (busy.previous, busy.state, busy.changed) == ("fail", "fail", False)
    back = record_check_run(
        store, first.id, result="pass", summary="holds again", ran_at=T0 + timedelta(hours=3)
    )
    assert back.changed and back.previous == "fail"
    assert set_posted(store, back.run.id or 0, "1700.1") is None
    runs = check_runs(store, first.id)
    assert [r.result for r in runs] == ["pass", "busy", "fail", "pass"] and runs[0].posted_ts == "1700.1"
    row = get_check(store, first.id)
    assert (
        row is not None and row.runs == 4 and row.last_result == "pass" and row.last_summary == "holds again"
    )
    week = failed_checks_between(store, T0 - timedelta(days=1), T0 + timedelta(days=7))
    assert [(r.check_id, r.summary) for r in week] == [(first.id, "48 -> 26")]
    with pytest.raises(ValueError, match="check result 'maybe'"):
        record_check_run(store, first.id, result="maybe", summary="")
    with pytest.raises(ValueError, match="naive datetime"):
        record_check_run(store, first.id, result="pass", summary="", ran_at=datetime(2026, 1, 1))


def test_the_state_is_shared_by_the_checks_of_one_experiment(store: Store) -> None:
    experiment = create_experiment(store, target="lab", playbook="try", params={}, actor="t")
    from bot.store.checks import add_check

    checks = [
        add_check(
            store,
            target="lab",
            experiment_id=experiment.id,
            after=timedelta(minutes=m),
            due_at=T0,
            expected={},
            created_by="t",
        )
        for m in (10, 1440)
    ]
    assert record_check_run(store, checks[0].id or 0, result="fail", summary="x").changed
    assert not record_check_run(store, checks[1].id or 0, result="fail", summary="x").changed
    other = concluded_check(store)  # another experiment starts at pass
    assert not record_check_run(store, other.id or 0, result="pass", summary="x").changed


def test_drift_records_every_watch_and_an_event_only_when_the_findings_change(store: Store) -> None:
    edit = {"key": "hand-edit:node1", "what": "edited", "evidence": []}
    restart = {"key": "restart", "what": "restarted", "evidence": []}
    first = record_drift(store, "lab", findings=[], reference={"invocation": "a"}, now=T0)
    assert not first.changed and get_drift(store, "lab").state == "ok"  # type: ignore[union-attr]
    seen = record_drift(store, "lab", findings=[edit], now=T0 + timedelta(minutes=30))
    assert seen.changed and seen.new == ("hand-edit:node1",)
    again = record_drift(store, "lab", findings=[edit], now=T0 + timedelta(minutes=60))
    assert not again.changed
    both = record_drift(store, "lab", findings=[restart, edit], now=T0 + timedelta(minutes=90))
    assert (
        both.new == ("restart",)
        and both.event is not None
        and [f["key"] for f in both.event.findings] == ["restart"]
    )
    gone = record_drift(store, "lab", findings=[], now=T0 + timedelta(minutes=120))
    assert (
        gone.resolved == ("hand-edit:node1", "restart")
        and gone.event is not None
        and gone.event.state == "ok"
    )
    state = get_drift(store, "lab")
    assert state is not None and state.reference == {"invocation": "a"}
    assert state.checked_at == T0 + timedelta(minutes=120) and state.changed_at == T0 + timedelta(minutes=120)
    assert len(drift_events(store, "lab")) == 3


# The drift state during a leader handover (issue 25): two replicas watching one target at once
# write one event, and a stale leader's late look changes nothing. The overlap is made
# deterministic on PostgreSQL: the test plays the first watch, holding its transaction open on the
# state row, while the second runs `record_drift` in a thread; the test commits only once the
# database shows the second waiting on that row's lock.

EDIT = {"key": "hand-edit:node1", "what": "edited", "evidence": []}
RESTART = {"key": "restart", "what": "restarted", "evidence": []}


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
