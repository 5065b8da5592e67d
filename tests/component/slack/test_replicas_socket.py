"""Two `flagbot serve` replicas on one PostgreSQL, each holding a Socket Mode connection to the
stand-in (issue 25): Slack spreads the envelopes over both, and every command is acted on once,
also when a connection drops after its envelope went out and the other replica gets it again.

Each replica is what `flagbot serve` builds (its own `SlackServices`, slack-bolt app, Socket Mode
client and database engine); the only thing they share is PostgreSQL, as two hosts would. The
command is `hypothesis add`: what it does is a row in the store and a reply in the channel, and
it needs no host.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from bot.config import Settings, load_settings
from bot.slack.app import build_app, serve_socket, web_client
from bot.slack.handlers import ALREADY_DELIVERED
from bot.slack.services import SlackServices
from bot.store import AsyncStore, Store
from bot.store.hypotheses import list_hypotheses
from flagbot_lab.standin import Standin
from tests.support.slack_bot import APP_TOKEN, PING_INTERVAL_S, SIGNING_SECRET, TOKEN

pytestmark = pytest.mark.asyncio
CHANNEL = "C0FLAGBOT"
OPERATOR = "U0OPER"
REPLICAS = 2


@pytest.fixture
def database(postgres_url: str) -> str:
    """The session's PostgreSQL, emptied and migrated for this test."""
    store = Store.open(postgres_url)
    try:
        with store.engine.begin() as connection:
            connection.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
        store.upgrade()
    finally:
        store.close()
    return postgres_url


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    config = tmp_path / "flagbot.toml"
    config.write_text(
        'default_target = "lab"\n[targets.lab]\nunit = "sglang.service"\nbase_url = "http://127.0.0.1:9"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n'
        '[slack.rbac]\noperators = ["U0OPER"]\nviewers = ["*"]\n'
    )
    return load_settings(config, required=True)


@asynccontextmanager
async def replica(settings: Settings, database: str, standin: Standin) -> AsyncIterator[SlackServices]:
    """One replica: its own engine on the shared database, its own app and Socket Mode client."""
    store = AsyncStore(Store.open(database))
    services = SlackServices(settings, store)
    app = build_app(
        services,
        token=TOKEN,
        signing_secret=SIGNING_SECRET,
        client=web_client(TOKEN, base_url=standin.api_url),
    )
    handler: Any = await serve_socket(app, APP_TOKEN, ping_interval=PING_INTERVAL_S)
    try:
        yield services
    finally:
        await handler.close_async()
        await services.drain()
        await store.aclose()


def recorded_replies(standin: Standin) -> int:
    return len([m for m in standin.messages(CHANNEL) if "recorded" in str(m.blocks) or "recorded" in m.text])


async def test_two_replicas_share_the_envelopes_and_act_on_each_command_once(
    settings: Settings, database: str
) -> None:
    standin = Standin(SIGNING_SECRET, bot_token=TOKEN, app_token=APP_TOKEN, socket_mode=True)
    await standin.start()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(standin.stop)
        replicas = []
        for opened in range(1, REPLICAS + 1):
            replicas.append(await stack.enter_async_context(replica(settings, database, standin)))
            await standin.socket.wait_connected(opened, live=opened)

        for number in range(6):
            answer = await standin.slash(f'hypothesis add "cause {number}"', user=OPERATOR, channel=CHANNEL)
            assert answer.status == 200 and ALREADY_DELIVERED not in answer.body
        await standin.wait_for(lambda: recorded_replies(standin) >= 6)
        carried = standin.socket.sent_on()
        assert sorted(set(carried)) == [1, 2] and carried.count(1) == carried.count(2) == 3

        # the next envelope's connection closes right after it went out: its ack cannot arrive, so
        # Slack sends it again, on the other replica's connection (or the first one's new one)
        standin.socket.drop_after_send(1)
        dropped = await standin.slash('hypothesis add "the dropped one"', user=OPERATOR, channel=CHANNEL)
        assert dropped.status == 200
        for services in replicas:
            await services.drain()
        await standin.wait_for(lambda: recorded_replies(standin) >= 7)
        retried = [e for e in standin.socket.envelopes() if e.retry_attempt]
        assert len(retried) == 1, "the dropped envelope was sent again"
        for services in replicas:
            await services.drain()
        key = f"delivery:command:{retried[0].payload['trigger_id']}"
        assert all(key in services.seen for services in replicas), "both replicas got the command"

        check = AsyncStore(Store.open(database))
        try:
            rows = await check.run(list_hypotheses, check.store, "lab")
        finally:
            await check.aclose()
        assert sorted(row.statement for row in rows) == sorted(
            [f"cause {number}" for number in range(6)] + ["the dropped one"]
        )
        assert recorded_replies(standin) == 7
