"""flagbot's Slack app against the local stand-in, for component and integration tests.

`running_bot(settings, store)` starts the stand-in and the app, and points each at the other:
in HTTP mode (the default here) the app listens on a loopback port chosen by the OS; with
`socket_mode=True` it connects to the stand-in's websocket as `flagbot serve` does by default.
Everything is stopped (and the runs in flight awaited) on exit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config import Settings, load_settings
from bot.slack.app import build_app, serve_http, serve_socket, web_client
from bot.slack.services import SlackServices
from bot.store import AsyncStore, Store
from flagbot_lab.standin import Standin
from flagbot_lab.standin.model import Channel
from tests.support.host_flags import seed_flag_lists

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


def unreachable_target(name: str) -> str:
    """The config tables of a target `name` that listens nowhere (port 9, a 1 s SSH connect
    timeout), braces doubled for `lab_config`'s `.format`."""
    return f"""[targets.{name}]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{{{ host = "127.0.0.1", port = 9 }}}}]
[targets.{name}.ssh]
connect_timeout = 1
"""


UNREACHABLE_LAB = unreachable_target("lab")
"""A target `lab` that listens nowhere (port 9, a 1 s SSH connect timeout): a test whose command
must be refused or answered before anything reaches a node fails fast if it does reach one."""


def lab_config(rbac: str, *, before: str = "", after: str = "") -> str:
    """A `configured_bot` config (its `{db}` is filled there): `lab` the default target, listening
    nowhere (`UNREACHABLE_LAB`); `rbac` the body of `[slack.rbac]`, `before` top-level keys, `after`
    more tables (a policy, other targets)."""
    return (
        f'default_target = "lab"\n{before}[database]\nsqlite_path = "{{db}}"\n[slack.rbac]\n{rbac}'
        f"{UNREACHABLE_LAB}{after}"
    )


@asynccontextmanager
async def configured_bot(
    directory: Path,
    config_text: str,
    channel: Channel,
    *,
    known_flags: bool = True,
    prepare: Callable[[Store], None] | None = None,
) -> AsyncIterator[RunningBot]:
    """A bot on a fresh SQLite store in `directory`, configured by `config_text` (its `{db}` is
    the store's path), with `channel` in the stand-in's workspace: the preamble the Slack
    component tests share. `known_flags` seeds the flag lists a bot that read its host before
    would have; `prepare` writes what the test needs in the store before the bot starts."""
    db = directory / "flagbot.db"
    config = directory / "flagbot.toml"
    config.write_text(config_text.format(db=db))
    sync = Store.open(f"sqlite:///{db}")
    sync.upgrade()
    if prepare is not None:
        prepare(sync)
    store = AsyncStore(sync)
    settings = load_settings(config, required=True)
    if known_flags:
        seed_flag_lists(settings)
    try:
        async with running_bot(settings, store) as running:
            running.standin.workspace.add_channel(channel)
            yield running
    finally:
        await store.aclose()
