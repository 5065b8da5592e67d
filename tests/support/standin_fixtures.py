"""Fixtures for the Slack and stand-in component tests: the stand-in, a real slack_sdk client, a
tiny Bolt bot (imported by tests/component/slack/conftest.py and tests/component/standin/conftest.py).

Everything listens on loopback ports chosen by the OS and is stopped in `finally`, so a
failing test leaves no server behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond, AsyncSay
from slack_sdk.web.async_client import AsyncWebClient

from flagbot_lab.standin import Standin

SIGNING_SECRET = "standin-signing-secret"
TOKEN = "xoxb-standin-test"


@pytest.fixture
async def standin() -> AsyncIterator[Standin]:
    """A started stand-in with no bot yet (Web API tests)."""
    s = Standin(SIGNING_SECRET, bot_token=TOKEN)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


@pytest.fixture
def client(standin: Standin) -> AsyncWebClient:
    """The real slack_sdk async client, pointed at the stand-in."""
    return AsyncWebClient(token=TOKEN, base_url=standin.api_url)


@dataclass
class BoltBot:
    """A real Bolt app over HTTP that records what its listeners received."""

    app: AsyncApp
    url: str = ""
    seen: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"command": [], "mention": [], "action": []}
    )
    retry_nums: list[str | None] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def record(self, kind: str, body: dict[str, Any]) -> None:
        self.seen[kind].append(body)
        async with self.changed:
            self.changed.notify_all()

    async def wait(self, kind: str, count: int = 1, timeout: float = 5.0) -> list[dict[str, Any]]:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: len(self.seen[kind]) >= count), timeout)
        return self.seen[kind]


def _bolt_app(standin: Standin) -> BoltBot:
    app = AsyncApp(
        signing_secret=SIGNING_SECRET,
        client=AsyncWebClient(token=TOKEN, base_url=standin.api_url),
    )
    bot = BoltBot(app)

    @app.command("/flagbot")
    async def command(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack(text=f"working on `{body['text']}`")
        await respond(text=f"done: {body['text']}")
        await bot.record("command", body)

    @app.event("app_mention")
    async def mention(body: dict[str, Any], event: dict[str, Any], say: AsyncSay, request: Any) -> None:
        bot.retry_nums.append(request.headers.get("x-slack-retry-num", [None])[0])
        await say(text="on it", thread_ts=event.get("thread_ts") or event["ts"])
        await bot.record("mention", body)

    @app.action("flagbot_revert")
    async def revert(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        await respond(text="reverting", response_type="in_channel")
        await bot.record("action", body)

    return bot


@pytest.fixture
async def bolt_bot(standin: Standin) -> AsyncIterator[BoltBot]:
    """The Bolt bot served on loopback, with the stand-in sending to it."""
    bot = _bolt_app(standin)

    async def events(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await bot.app.async_dispatch(await to_bolt_request(request)))

    web_app = web.Application()
    web_app.router.add_post("/slack/events", events)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        bot.url = f"http://{host}:{port}"
        standin.bot_url = bot.url
        yield bot
    finally:
        await runner.cleanup()
