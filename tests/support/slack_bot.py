"""flagbot's Slack app in HTTP mode against the local stand-in, for component and integration tests.

`running_bot(settings, store)` starts the stand-in, the app on a loopback port chosen by the OS,
and points each at the other; everything is stopped (and the runs in flight awaited) on exit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from bot.config import Settings
from bot.slack.app import build_app, serve_http, web_client
from bot.slack.services import SlackServices
from bot.slack.standin import Standin
from bot.store import AsyncStore

SIGNING_SECRET = "flagbot-test-signing-secret"
TOKEN = "xoxb-flagbot-test"


@dataclass
class RunningBot:
    standin: Standin
    services: SlackServices
    url: str


@asynccontextmanager
async def running_bot(
    settings: Settings, store: AsyncStore, *, lease_ttl_s: float = 60.0
) -> AsyncIterator[RunningBot]:
    standin = Standin(SIGNING_SECRET, bot_token=TOKEN)
    await standin.start()
    services = SlackServices(settings, store, lease_ttl_s=lease_ttl_s)
    runner: Any = None
    try:
        app = build_app(
            services,
            token=TOKEN,
            signing_secret=SIGNING_SECRET,
            client=web_client(TOKEN, base_url=standin.api_url),
        )
        runner = await serve_http(app, "127.0.0.1", 0)
        host, port = runner.addresses[0][:2]
        url = f"http://{host}:{port}"
        standin.bot_url = url
        yield RunningBot(standin, services, url)
    finally:
        await services.drain()
        if runner is not None:
            await runner.cleanup()
        await standin.stop()
