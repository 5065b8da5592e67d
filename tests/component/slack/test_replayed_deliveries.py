"""A command or an event Slack delivers twice, or a signed request replayed within its 5-minute
window, acts once: also after the bot restarted (issue 17 item 9). The keys are in the store
(`slack_seen_key`), so a new app on the same database remembers them; HTTP mode and Socket Mode
alike, through the real slack-bolt app and the stand-in.

The command is `hypothesis add`: what it does is visible as a row in the store and a reply in
the channel, and it needs no host.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings, load_settings
from bot.slack.app import EVENTS_PATH, build_app, serve_http, serve_socket, web_client
from bot.slack.handlers import ALREADY_DELIVERED
from bot.slack.services import SlackServices
from bot.store import AsyncStore, Store
from bot.store.hypotheses import list_hypotheses
from bot.store.models import utcnow
from bot.store.seen_keys import DELIVERY_KEEP, first_time, first_times, forget_deliveries
from flagbot_lab.standin.outbound import BotRequest
from flagbot_lab.standin.socket_mode import Envelope
from tests.support.slack_bot import APP_TOKEN, PING_INTERVAL_S, SIGNING_SECRET, TOKEN, RunningBot, running_bot

pytestmark = pytest.mark.asyncio
CHANNEL = "C0FLAGBOT"
OPERATOR = "U0OPER"
ADD = 'hypothesis add "fused MoE sum costs KV memory"'


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    config = tmp_path / "flagbot.toml"
    config.write_text(
        'default_target = "lab"\n[targets.lab]\nunit = "sglang.service"\nbase_url = "http://127.0.0.1:9"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n'
        f'[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
        '[slack.rbac]\nadmins = ["U0ADMIN"]\noperators = ["U0OPER"]\nviewers = ["*"]\n'
    )
    return load_settings(config, required=True)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    store = AsyncStore(sync)
    try:
        yield store
    finally:
        await store.aclose()


async def _acted(bot: RunningBot, store: AsyncStore) -> tuple[int, int]:
    """(hypotheses recorded, replies posted by the bot in the channel)."""
    await bot.services.drain()
    rows = await store.run(list_hypotheses, store.store, "lab")
    replies = [
        m for m in bot.standin.messages(CHANNEL) if "recorded" in str(m.blocks) or "recorded" in m.text
    ]
    return len(rows), len(replies)


async def test_a_replayed_signed_slash_command_acts_once_also_after_a_restart(
    settings: Settings, store: AsyncStore
) -> None:
    async with running_bot(settings, store) as bot:
        first = await bot.standin.slash(ADD, user=OPERATOR, channel=CHANNEL)
        assert first.status == 200
        await bot.standin.wait_for(
            lambda: [m for m in bot.standin.messages(CHANNEL) if "recorded" in str(m.blocks)]
        )
        assert await _acted(bot, store) == (1, 1)
        captured = first.request
        assert isinstance(captured, BotRequest)

        replayed = await bot.standin.send(captured)  # byte for byte: same timestamp, same signature
        assert replayed.status == 200 and replayed.json()["text"] == ALREADY_DELIVERED
        retried = await bot.standin.redeliver(captured, retry_num=1)  # Slack's own retry
        assert retried.status == 200 and retried.json()["text"] == ALREADY_DELIVERED
        assert await _acted(bot, store) == (1, 1)

        # a restart: a new app with empty memory, on the same database, gets the replay
        services = SlackServices(settings, store)
        app = build_app(
            services,
            token=TOKEN,
            signing_secret=SIGNING_SECRET,
            client=web_client(TOKEN, base_url=bot.standin.api_url),
        )
        runner = await serve_http(app, "127.0.0.1", 0)
        try:
            host, port = runner.addresses[0][:2]
            again = await bot.standin.send(replace(captured, url=f"http://{host}:{port}{EVENTS_PATH}"))
            assert again.status == 200 and again.json()["text"] == ALREADY_DELIVERED
            await services.drain()
        finally:
            await runner.cleanup()
        assert await _acted(bot, store) == (1, 1)

        other = await bot.standin.slash(ADD, user=OPERATOR, channel=CHANNEL)  # typed again: a new command
        assert other.status == 200 and ALREADY_DELIVERED not in other.body
        await bot.standin.wait_for(
            lambda: len([m for m in bot.standin.messages(CHANNEL) if "recorded" in str(m.blocks)]) >= 2
        )
        assert await _acted(bot, store) == (2, 2)


async def test_a_redelivered_mention_acts_once_after_a_restart(settings: Settings, store: AsyncStore) -> None:
    async with running_bot(settings, store) as bot:
        root = bot.standin.workspace.post(CHANNEL, user=OPERATOR, text="investigating")
        first = await bot.standin.mention(ADD, user=OPERATOR, channel=CHANNEL, thread_ts=root.ts)
        assert first.status == 200
        await bot.standin.wait_for(
            lambda: [m for m in bot.standin.messages(CHANNEL, root.ts) if "recorded" in str(m.blocks)]
        )
        await bot.services.drain()
        bot.services.seen.clear()  # what a restarted bot remembers in memory: nothing
        again = await bot.standin.send(first.request)
        assert again.status == 200
        await bot.services.drain()
        rows = await store.run(list_hypotheses, store.store, "lab")
        assert len(rows) == 1


async def test_a_slash_command_redelivered_in_socket_mode_acts_once_after_a_restart(
    settings: Settings, store: AsyncStore
) -> None:
    async with running_bot(settings, store, socket_mode=True) as bot:
        first = await bot.standin.slash(ADD, user=OPERATOR, channel=CHANNEL)
        assert first.status == 200
        await bot.standin.wait_for(
            lambda: [m for m in bot.standin.messages(CHANNEL) if "recorded" in str(m.blocks)]
        )
        envelope = first.request
        assert isinstance(envelope, Envelope)
        assert await _acted(bot, store) == (1, 1)

        # the bot restarts: its Socket Mode handler (and the answers it kept in memory) are gone
        services = SlackServices(settings, store)
        app = build_app(
            services,
            token=TOKEN,
            signing_secret=SIGNING_SECRET,
            client=web_client(TOKEN, base_url=bot.standin.api_url),
        )
        opened = bot.standin.socket.connections_opened
        handler = await serve_socket(app, APP_TOKEN, ping_interval=PING_INTERVAL_S)
        try:
            await bot.standin.socket.wait_connected(opened + 1)  # the newest connection gets what is sent
            again = await bot.standin.redeliver(envelope, retry_num=1)
            assert again.status == 200 and again.json()["text"] == ALREADY_DELIVERED
            await services.drain()
        finally:
            await handler.close_async()
        assert await _acted(bot, store) == (1, 1)


async def test_delivery_keys_are_dropped_after_a_day_and_button_keys_kept(store: AsyncStore) -> None:
    sync = store.store
    assert first_time(sync, "delivery:command:T1", actor="U1")
    assert first_time(sync, "click:n7keep", actor="U1")
    assert forget_deliveries(sync) == 0  # a fresh key is kept
    assert not first_time(sync, "delivery:command:T1", actor="U1")
    later = utcnow() + DELIVERY_KEEP + timedelta(minutes=1)
    assert forget_deliveries(sync, now=later) == 1
    assert first_time(sync, "delivery:command:T1", actor="U1")  # gone: the table does not grow forever
    assert not first_time(sync, "click:n7keep", actor="U1")  # a button acts once, however late


class CountedStore(AsyncStore):
    """The store, counting the trips that record idempotency keys."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.key_trips = 0

    async def run(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        if func is first_times:
            self.key_trips += 1
        return await super().run(func, *args, **kwargs)


async def test_a_burst_of_deliveries_records_its_keys_in_a_few_trips_and_each_acts_once(
    settings: Settings, store: AsyncStore
) -> None:
    counted = CountedStore(store.store)
    try:
        services = SlackServices(settings, counted)
        keys = [f"T{i}" for i in range(30)]
        got = await asyncio.gather(*(services.first_delivery("command", key, "U1") for key in [*keys, "T3"]))
        assert got == [True] * 30 + [False]
        assert 1 <= counted.key_trips <= 3  # the first key's trip, then the rest together
        restarted = SlackServices(settings, counted)  # a new process on the same database
        again = await asyncio.gather(
            *(restarted.first_delivery("command", key, "U2") for key in ["T0", "T29", "T30"])
        )
        assert again == [False, False, True]
    finally:
        await counted.aclose()


async def test_a_store_that_fails_fails_each_waiting_delivery(settings: Settings, store: AsyncStore) -> None:
    services = SlackServices(settings, store)
    await store.aclose()  # its worker is gone: every trip fails
    outcomes = await asyncio.gather(
        *(services.first_delivery("command", f"T{i}", "U1") for i in range(4)), return_exceptions=True
    )
    assert all(isinstance(outcome, RuntimeError) for outcome in outcomes)
    assert not services._storing and not services._unstored
