"""The scheduler's leader lock on a real PostgreSQL (`bot.store.leader_lock`): one holder at a
time, free again when the holder releases it or its session dies (what a SIGKILL does), and the
former holder learns it lost it. SQLite always leads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.store import Store
from bot.store.leader_lock import LEADER_LOCK_KEY, AdvisoryLeaderLock, SoleLeader, leader_lock_for
from tests.support.schedule import migrated_store


@pytest.fixture
def pg_store(tmp_path: Path, postgres_url: str) -> Iterator[Store]:
    opened = migrated_store("postgresql", tmp_path, postgres_url)
    yield opened
    opened.close()


def _holder_pids(store: Store) -> list[int]:
    with store.engine.connect() as connection:
        return list(
            connection.execute(
                text("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = :low"),
                {"low": LEADER_LOCK_KEY & 0xFFFFFFFF},
            ).scalars()
        )


def test_one_holder_at_a_time_and_free_after_release(pg_store: Store) -> None:
    first, second = leader_lock_for(pg_store.engine), leader_lock_for(pg_store.engine)
    assert isinstance(first, AdvisoryLeaderLock)
    try:
        assert first.try_acquire() and first.held()
        assert not second.try_acquire() and not second.held()
        first.release()
        assert not first.held()
        assert second.try_acquire() and second.held()
    finally:
        first.release()
        second.release()
    assert _holder_pids(pg_store) == []


def test_a_holder_whose_session_dies_loses_the_lock_to_the_next(pg_store: Store) -> None:
    first, second = AdvisoryLeaderLock(pg_store.engine), AdvisoryLeaderLock(pg_store.engine)
    try:
        assert first.try_acquire()
        (pid,) = _holder_pids(pg_store)
        with pg_store.engine.connect() as connection:  # as when the leader's process is killed
            # with a timeout it returns once the backend has exited (its locks released), not
            # when the signal is sent: without one, a busy machine let `second` ask too soon
            ended = connection.execute(
                text("SELECT pg_terminate_backend(:pid, :timeout_ms)"), {"pid": pid, "timeout_ms": 30_000}
            ).scalar_one()
            connection.commit()
        assert ended is True
        assert second.try_acquire()
        assert not first.held()  # it finds out at its next look, and stops its scheduler
        assert not first.try_acquire()  # a fresh session, still not the holder
    finally:
        first.release()
        second.release()


def test_sqlite_always_leads(tmp_path: Path) -> None:
    store = migrated_store("sqlite", tmp_path)
    try:
        lock = leader_lock_for(store.engine)
        assert isinstance(lock, SoleLeader) and lock.try_acquire() and lock.held()
    finally:
        store.close()
