"""`flagbot serve`: the long-running bot. Socket Mode by default (no public URL); `--http
HOST:PORT` serves Slack's HTTP requests with signature verification.

Why a module of its own: it is where the front ends meet. It opens the application context once,
starts the Slack app (`bot.slack`) and the scheduler (`bot.schedule`), and hands the scheduler
the Slack implementations of the application layer's notification interfaces; neither front end
imports the other.

Tokens come from the environment only (SLACK_BOT_TOKEN, SLACK_APP_TOKEN for Socket Mode,
SLACK_SIGNING_SECRET for HTTP mode); a missing one is named, never guessed. `--slack-api URL`
points the Web API client at another base URL (the local stand-in the demo and tests use).

Several `flagbot serve` may share one PostgreSQL (docs/operations.md, "Two replicas"): each
serves Slack, but the scheduler runs only in the elected leader (`bot.schedule.election`), and
each answers its own health endpoint (`bot.app.health`, `[replicas]` in flagbot.toml).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import SecretStr

from bot.aio import stop_tasks
from bot.app.context import lease_ttl_s, open_store
from bot.app.errors import AppError
from bot.app.health import HealthReport, serve_health
from bot.app.playbooks import load_set
from bot.app.runtime import this_replica
from bot.cli.common import fail, settings
from bot.config import Secrets, Settings
from bot.slack.services import SlackServices
from bot.store import AsyncStore
from bot.store.leader_lock import leader_lock_for
from bot.store.schema_revision import current_revision
from bot.target.ssh_pool import pooled

if TYPE_CHECKING:  # the Slack SDK loads when `serve` runs (start-up time of other commands)
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.schedule.election import Elector

log = logging.getLogger(__name__)
STOP_GRACE_S = 60.0
"""How long runs in flight may go on after SIGTERM before they are cancelled (systemd's
TimeoutStopSec should be longer); `FLAGBOT_STOP_GRACE_S` changes it, a second signal skips it."""


def register_serve(app: typer.Typer) -> None:
    app.command("serve")(serve)


def _need(value: SecretStr | None, name: str) -> str:
    if value is None:
        typer.echo(
            f"error: {name} is not set (secrets come from the environment, never the config file)", err=True
        )
        raise typer.Exit(2)
    return str(value.get_secret_value())


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        typer.echo(f"error: --http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:3000", err=True)
        raise typer.Exit(2)
    return host, int(port)


def serve(
    http: Annotated[
        str | None, typer.Option("--http", help="serve HTTP mode on HOST:PORT instead of Socket Mode")
    ] = None,
    slack_api: Annotated[
        str | None, typer.Option("--slack-api", help="Web API base URL (default: slack.com)")
    ] = None,
) -> None:
    """Run the Slack bot (Socket Mode, or HTTP mode with --http HOST:PORT)."""
    config = settings()
    load_set(config)  # a broken playbook file is told once, at start (the others load)
    secrets = Secrets()
    token = _need(secrets.slack_bot_token, "SLACK_BOT_TOKEN")
    if http is not None:
        address = _address(http)
        signing = _need(secrets.slack_signing_secret, "SLACK_SIGNING_SECRET")
        asyncio.run(_run_http(config, token, signing, address, slack_api))
    else:
        app_token = _need(secrets.slack_app_token, "SLACK_APP_TOKEN")
        signing = (
            secrets.slack_signing_secret.get_secret_value() if secrets.slack_signing_secret else "unused"
        )
        asyncio.run(_run_socket(config, token, signing, app_token, slack_api))


async def _services(config: Settings) -> SlackServices:
    try:
        store = open_store(config)
    except AppError as exc:
        raise fail(f"error: {exc.message}", exc.exit_code) from None
    return SlackServices(config, AsyncStore(store), lease_ttl_s=lease_ttl_s())


async def wind_down(services: SlackServices, stop: asyncio.Event, grace_s: float | None = None) -> None:
    """Let the runs in flight finish, for `grace_s` or until a second signal; then cancel them.

    A cancelled run stops at once and records where it stopped; its lease expires and the next
    mutating command (or the next `flagbot serve`) resumes it or rolls it back. Nothing the user
    recorded is lost either way; waiting without end would only make systemd kill the bot.
    """
    grace = float(os.environ.get("FLAGBOT_STOP_GRACE_S", STOP_GRACE_S)) if grace_s is None else grace_s
    stop.clear()  # the first signal started the wind-down; a second one ends the grace
    if services.tasks:
        log.warning("stopping: %d run(s) in flight get up to %.0f s to finish", len(services.tasks), grace)
        draining = asyncio.ensure_future(services.drain())
        again = asyncio.ensure_future(stop.wait())
        await asyncio.wait({draining, again}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
        await stop_tasks([again])
        if not draining.done():
            log.warning(
                "stopping: cancelling %d run(s); the next start resumes or rolls them back",
                len(services.tasks),
            )
            await stop_tasks(list(services.tasks), grace_s=30)
        await stop_tasks([draining])


def _scheduler(services: SlackServices, client: AsyncWebClient) -> AbstractAsyncContextManager[object]:
    """The scheduler, telling checks and drift in Slack and posting the Monday digest there."""
    # deferred: APScheduler's scheduler (~20 ms) runs in `serve` only; every other command would pay for it
    from bot.schedule.scheduler import running_scheduler

    # deferred: the Slack stack (slack_bolt, slack_sdk, aiohttp: ~0.15 s), only `serve` posts to Slack
    from bot.slack.notify import SlackDigestPublisher, SlackNotifier

    notifier = SlackNotifier(client, services.settings.slack.investigation_channel)
    return running_scheduler(
        services.context, notifier=notifier, digest=SlackDigestPublisher(services, client)
    )


def _elector(services: SlackServices, client: AsyncWebClient) -> Elector:
    """The election of this replica: the scheduler runs while it leads (always on SQLite)."""
    # deferred: the election module loads with the scheduler, in `serve` only (as `_scheduler`)
    from bot.schedule.election import Elector

    engine = services.store.store.engine
    return Elector(
        leader_lock_for(engine),
        schema_revision=lambda: current_revision(engine),
        lead=lambda: _scheduler(services, client),
        interval_s=services.settings.replicas.election_interval.total_seconds(),
    )


def _schema_of(services: SlackServices) -> tuple[bool, str | None]:
    """Whether the database answered, and its schema revision when it did."""
    try:
        return True, current_revision(services.store.store.engine)
    except Exception as exc:  # any failure to answer is "unreachable" to the health check
        log.warning("health: the database did not answer: %s", exc)
        return False, None


@asynccontextmanager
async def replica(
    services: SlackServices, client: AsyncWebClient, slack_connected: Callable[[], Awaitable[bool]]
) -> AsyncIterator[Elector]:
    """For the block: this replica's election (and the scheduler while it leads) and its health
    endpoint; on the way out the scheduler stops and the leader lock is given up."""
    elector = _elector(services, client)
    replica_id = this_replica()

    async def report() -> HealthReport:
        database, schema = await asyncio.to_thread(_schema_of, services)
        state = elector.state
        return HealthReport(
            database=database,
            slack=await slack_connected(),
            role=state.role.value,
            since=state.since.isoformat() if state.since else None,
            reason=state.reason,
            replica=replica_id,
            schema=schema,
        )

    config = services.settings.replicas
    health = (
        await serve_health(config.health_host, config.health_port, report) if config.health_port else None
    )
    if health is not None:
        typer.echo(f"flagbot: health on http://{config.health_host}:{health.port}/health", err=True)
    electing = asyncio.Event()
    task = asyncio.ensure_future(elector.run(electing))
    try:
        yield elector
    finally:
        electing.set()
        await task
        if health is not None:
            await health.close()


async def _always_connected() -> bool:
    """HTTP mode holds no connection to Slack: Slack calls in, so there is nothing to lose."""
    return True


def _stop_signal() -> asyncio.Event:
    """Set by SIGINT / SIGTERM. Installed before anything starts, so a signal that arrives while
    the bot connects or the scheduler starts still stops it cleanly (instead of killing it)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _run_http(
    config: Settings, token: str, signing: str, address: tuple[str, int], api: str | None
) -> None:
    # deferred: the Slack app (slack_bolt, slack_sdk, aiohttp: ~0.35 s); `serve` alone needs it
    from bot.slack.app import build_app, serve_http, web_client
    from bot.slack.startup import reconcile_at_start  # deferred: the Slack stack, as above

    stop = _stop_signal()
    async with pooled():  # SSH connections reused between commands, closed at the end
        services = await _services(config)
        app = build_app(services, token=token, signing_secret=signing, client=web_client(token, base_url=api))
        runner = await serve_http(app, *address)
        typer.echo(f"flagbot: HTTP mode on http://{address[0]}:{address[1]}/slack/events", err=True)
        services.spawn(reconcile_at_start(services, app.client))  # runs a stopped bot left unfinished
        try:
            # checks, drift, digest (bot/schedule) while this replica leads; its health endpoint
            async with replica(services, app.client, _always_connected):
                await stop.wait()
        finally:
            await runner.cleanup()
            await wind_down(services, stop)
            await services.store.aclose()


async def _run_socket(config: Settings, token: str, signing: str, app_token: str, api: str | None) -> None:
    # deferred: the Slack app (slack_bolt, slack_sdk, aiohttp: ~0.35 s); `serve` alone needs it
    from bot.slack.app import build_app, serve_socket, web_client
    from bot.slack.startup import reconcile_at_start  # deferred: the Slack stack, as above

    stop = _stop_signal()
    async with pooled():  # SSH connections reused between commands, closed at the end
        services = await _services(config)
        app = build_app(services, token=token, signing_secret=signing, client=web_client(token, base_url=api))
        handler = await serve_socket(app, app_token)
        typer.echo("flagbot: Socket Mode connected", err=True)
        services.spawn(reconcile_at_start(services, app.client))  # runs a stopped bot left unfinished
        try:
            # checks, drift, digest (bot/schedule) while this replica leads; its health endpoint
            async with replica(services, app.client, handler.client.is_connected):
                await stop.wait()
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
            await wind_down(services, stop)
            await services.store.aclose()
