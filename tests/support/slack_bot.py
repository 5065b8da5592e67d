"""flagbot's Slack app against the local stand-in, for component and integration tests.

`running_bot(settings, store)` starts the stand-in and the app, and points each at the other:
in HTTP mode (the default here) the app listens on a loopback port chosen by the OS; with
`socket_mode=True` it connects to the stand-in's websocket as `flagbot serve` does by default.
Everything is stopped (and the runs in flight awaited) on exit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from bot.config import Settings
from bot.slack.app import build_app, serve_http, serve_socket, web_client
from bot.slack.services import SlackServices
from bot.store import AsyncStore
from flagbot_lab.standin import Standin

SIGNING_SECRET = "flagbot-test-signing-secret"
TOKEN = "xoxb-flagbot-test"
APP_TOKEN = "xapp-flagbot-test"
PING_INTERVAL_S = 0.5
"""Socket Mode's ping interval in tests: how soon a dropped connection is noticed (10 s in serve)."""


@dataclass
class RunningBot:
    standin: Standin
    services: SlackServices
    url: str  # the bot's HTTP URL; in Socket Mode the stand-in's (the bot listens nowhere)


@asynccontextmanager
async def running_bot(
    settings: Settings, store: AsyncStore, *, lease_ttl_s: float = 60.0, socket_mode: bool = False
) -> AsyncIterator[RunningBot]:
    standin = Standin(SIGNING_SECRET, bot_token=TOKEN, app_token=APP_TOKEN, socket_mode=socket_mode)
    await standin.start()
    services = SlackServices(settings, store, lease_ttl_s=lease_ttl_s)
    runner: Any = None
    handler: Any = None
    try:
        app = build_app(
            services,
            token=TOKEN,
            signing_secret=SIGNING_SECRET,
            client=web_client(TOKEN, base_url=standin.api_url),
        )
        if socket_mode:
            handler = await serve_socket(app, APP_TOKEN, ping_interval=PING_INTERVAL_S)
            await standin.socket.wait_connected()
            url = standin.base_url
        else:
            runner = await serve_http(app, "127.0.0.1", 0)
            host, port = runner.addresses[0][:2]
            url = f"http://{host}:{port}"
            standin.bot_url = url
        yield RunningBot(standin, services, url)
    finally:
        if handler is not None:
            await handler.close_async()
        await services.drain()
        if runner is not None:
            await runner.cleanup()
        await standin.stop()
