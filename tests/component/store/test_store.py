"""The store on SQLite and on a real PostgreSQL: migrations, pragmas, round-trips, async use."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlmodel import SQLModel

from bot.store import AsyncStore, Measurement, Snapshot, Store, StoreNotReadyError
from bot.store.database import database_url
from bot.store.migrate import head_revision, upgrade


@pytest.fixture
def store(empty_store: Store) -> Store:
    """Each test starts from an empty schema, on SQLite and on PostgreSQL (tests/conftest.py)."""
    return empty_store


def test_a_fresh_database_is_refused_until_upgraded(store: Store) -> None:
    with pytest.raises(StoreNotReadyError, match="run `flagbot db upgrade`"):
        store.check_ready()
    assert store.upgrade() == head_revision(store.engine)
    store.check_ready()
    assert {"snapshot", "measurement", "alembic_version"} <= set(inspect(store.engine).get_table_names())


def test_upgrade_is_idempotent(store: Store) -> None:
    store.upgrade()
    assert store.upgrade() == head_revision(store.engine)


def test_every_revision_downgrades_and_upgrades_again(store: Store) -> None:
    from alembic import command

    from bot.store.migrate import alembic_config

    store.upgrade()
    command.downgrade(alembic_config(store.engine), "base")
    assert set(inspect(store.engine).get_table_names()) <= {"alembic_version"}
    upgrade(store.engine, "0001")
    assert store.revision() == "0001"
    assert store.upgrade() == head_revision(store.engine)


def test_models_and_migrations_agree(store: Store) -> None:
    store.upgrade()
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, SQLModel.metadata) == []


def test_round_trip_with_json_and_aware_timestamps(store: Store) -> None:
    store.upgrade()
    snapshot = store.add(
        Snapshot(
            target="sglang-qwen",
            requested_flags=[
                {"flag": "--cuda-graph-bs", "value": ["4", "8"]},
                {"flag": "--x", "value": None},
            ],
            server_args={"max_running_requests": 48, "cuda_graph_config": {"raw": "CudaGraphConfig()"}},
            effective={"max_running_requests": 26, "available_gpu_mem_gb": 6.22},
            ready=True,
        )
    )
    assert snapshot.id is not None
    store.add(
        Measurement(
            target="sglang-qwen",
            snapshot_id=snapshot.id,
            concurrency=64,
            repeat=1,
            metrics={"output_throughput": 1582.4},
        )
    )
    store.add(Measurement(target="sglang-qwen", snapshot_id=snapshot.id, concurrency=1, metrics={}))
    latest = store.latest_snapshot("sglang-qwen")
    assert latest is not None
    assert latest.requested_flags[0]["value"] == ["4", "8"]
    assert latest.server_args == {
        "max_running_requests": 48,
        "cuda_graph_config": {"raw": "CudaGraphConfig()"},
    }
    assert latest.captured_at.tzinfo is not None
    assert abs((datetime.now(UTC) - latest.captured_at).total_seconds()) < 60
    assert [m.concurrency for m in store.measurements(snapshot_id=snapshot.id)] == [1, 64]
    assert store.latest_snapshot("other") is None


def test_naive_timestamps_are_refused(store: Store) -> None:
    store.upgrade()
    with pytest.raises(Exception, match="naive datetime"):
        store.add(Snapshot(target="t", captured_at=datetime(2026, 1, 1)))


def test_foreign_keys_are_enforced(store: Store) -> None:
    store.upgrade()
    with pytest.raises(Exception, match=r"(?i)foreign key"):
        store.add(Measurement(target="t", snapshot_id=999_999))


def test_sqlite_runs_in_wal_mode_in_state(tmp_path: Path) -> None:
    path = tmp_path / "state" / "flagbot.db"
    store = Store.open(None, sqlite_path=path)
    try:
        store.upgrade()
        with store.engine.connect() as connection:
            assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert path.is_file()
    finally:
        store.close()


def test_postgres_urls_use_psycopg3() -> None:
    assert database_url("postgresql://u:p@h:5432/d").startswith("postgresql+psycopg://u:p@h:5432/d")


async def test_async_store_works_off_the_event_loop_thread(store: Store) -> None:
    store.upgrade()
    async_store = AsyncStore(store)
    loop_thread = threading.get_ident()
    try:
        threads = await asyncio.gather(*(async_store.run(threading.get_ident) for _ in range(3)))
        assert loop_thread not in threads
        rows = await asyncio.gather(*(async_store.run(store.add, Snapshot(target=f"t{i}")) for i in range(5)))
        assert sorted(row.target for row in rows) == [f"t{i}" for i in range(5)]
        latest = await async_store.run(store.latest_snapshot, "t3")
        assert latest is not None and latest.target == "t3"
    finally:
        await async_store.aclose()
