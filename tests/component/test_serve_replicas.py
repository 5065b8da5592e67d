"""`flagbot serve`'s replica side (`bot.serve.replica`): each replica answers `GET /health` with
its database, its Slack connection and its role; on SQLite the one bot leads; two replicas on one
PostgreSQL elect one leader, and the other takes over when the leader stops. The Slack client is
never called here (nothing is posted); waits are on conditions with deadlines."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from sqlalchemy import text

from bot.config import Settings
from bot.serve import replica
from bot.slack.services import SlackServices
from bot.store import AsyncStore, Store
from bot.store.schema_revision import SCHEMA_HEAD
from tests.support.schedule import migrated_store
from tests.support.twin_process import free_port
from tests.support.waits import until


def services_on(store: AsyncStore, tmp_path: Path, port: int) -> SlackServices:
    config = Settings.model_validate(
        {
            "database": {"sqlite_path": str(tmp_path / "state" / "flagbot.db")},
            "replicas": {"health_port": port, "election_interval": "1s"},
        }
    )
    return SlackServices(config, store)


class Connection:
    def __init__(self) -> None:
        self.up = True

    async def __call__(self) -> bool:
        return self.up


async def health(port: int) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(trust_env=False) as client:
        answer = await client.get(f"http://127.0.0.1:{port}/health", timeout=10)
    return answer.status_code, cast(dict[str, Any], answer.json())


def role_is(port: int, role: str) -> Callable[[], Any]:
    async def check() -> bool:
        return (await health(port))[1]["role"] == role

    return check


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    store = AsyncStore(migrated_store("sqlite", tmp_path))
    yield store
    await store.aclose()


async def test_a_sqlite_bot_leads_and_its_health_says_what_is_up(
    sqlite_store: AsyncStore, tmp_path: Path
) -> None:
    port, slack = free_port(), Connection()
    services = services_on(sqlite_store, tmp_path, port)
    async with replica(services, cast(Any, object()), slack) as elector:
        await until(role_is(port, "leader"), "the bot to lead")
        status, body = await health(port)
        assert status == 200 and elector.state.leader
        assert body | {"since": None, "replica": None} == {
            "ok": True,
            "database": True,
            "slack": True,
            "role": "leader",
            "leader": True,
            "since": None,
            "reason": None,
            "replica": None,
            "schema": SCHEMA_HEAD,
        }
        slack.up = False
        status, body = await health(port)
        assert status == 503 and body["ok"] is False and body["slack"] is False and body["database"] is True
        async with httpx.AsyncClient(trust_env=False) as client:
            assert (await client.get(f"http://127.0.0.1:{port}/other")).status_code == 404
            assert (await client.post(f"http://127.0.0.1:{port}/health")).status_code == 405
    with pytest.raises(httpx.ConnectError):  # closed with the replica
        await health(port)


async def test_two_replicas_on_postgresql_elect_one_and_the_other_takes_over(
    tmp_path: Path, postgres_url: str
) -> None:
    first_store = AsyncStore(migrated_store("postgresql", tmp_path, postgres_url))
    second_store = AsyncStore(Store.open(postgres_url))  # a second process's own engine
    ports = [free_port(), free_port()]
    try:
        async with AsyncExitStack() as first_stack:
            first = services_on(first_store, tmp_path, ports[0])
            await first_stack.enter_async_context(replica(first, cast(Any, object()), Connection()))
            await until(role_is(ports[0], "leader"), "the first replica to lead")
            second = services_on(second_store, tmp_path, ports[1])
            async with replica(second, cast(Any, object()), Connection()):
                await until(role_is(ports[1], "standby"), "the second replica to stand by")
                assert (await health(ports[0]))[1]["leader"] is True
                await first_stack.aclose()  # the leader stops (its lock is given up)
                await until(role_is(ports[1], "leader"), "the second replica to take over")
    finally:
        await first_store.aclose()
        await second_store.aclose()


async def test_a_replica_older_than_the_database_stands_down_and_says_so(
    tmp_path: Path, postgres_url: str
) -> None:
    store = AsyncStore(migrated_store("postgresql", tmp_path, postgres_url))
    port = free_port()
    try:
        async with replica(services_on(store, tmp_path, port), cast(Any, object()), Connection()) as elector:
            await until(role_is(port, "leader"), "the replica to lead")
            with store.store.engine.begin() as connection:  # a newer flagbot ran `flagbot db upgrade`
                connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
            await until(role_is(port, "stood-down"), "the replica to stand down")
            status, body = await health(port)
            assert status == 200 and body["leader"] is False and body["schema"] == "9999"
            assert "schema is at 9999" in body["reason"] and SCHEMA_HEAD in body["reason"]
            assert not elector.state.leader
    finally:
        await store.aclose()
