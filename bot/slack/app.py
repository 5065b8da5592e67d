"""The Slack app: a factory (no global app), its listeners, and the two ways to serve it.

`build_app` makes a slack-bolt `AsyncApp` and `register_listeners` wires the handlers, so tests
build as many apps as they like. HTTP mode (`flagbot serve --http HOST:PORT`) verifies every
request's signature (Bolt does, with the signing secret); Socket Mode (the default: no public
URL) connects out with the app-level token. Both run in one event loop with the engine's runs.
"""

from __future__ import annotations

import re
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.dispatch import preload
from bot.slack.handlers import on_action, on_command, on_mention
from bot.slack.services import SlackServices

EVENTS_PATH = "/slack/events"


def web_client(token: str, *, base_url: str | None = None) -> AsyncWebClient:
    """A Web API client that waits out 429s (Slack's rate limits) instead of failing the run."""
    client = AsyncWebClient(token=token, base_url=base_url or AsyncWebClient.BASE_URL)
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=3))
    return client


def build_app(
    services: SlackServices, *, token: str, signing_secret: str, client: AsyncWebClient | None = None
) -> AsyncApp:
    """A new app for `services`; `client` points elsewhere than slack.com (the stand-in)."""
    app = AsyncApp(
        token=token,
        signing_secret=signing_secret,
        client=client or web_client(token),
        # the listeners ack and hand their work to tasks, so the answer can go as they return
        # (without it Bolt polls for the ack every 10 ms, behind every task that is ready)
        process_before_response=True,
    )
    register_listeners(app, services)
    preload()  # before the first request, not on the event loop during one
    return app


def register_listeners(app: AsyncApp, services: SlackServices) -> None:
    """The command, the mention and the buttons; `services` reaches handlers via the context."""

    @app.middleware
    async def with_services(context: Any, next: Any) -> Any:
        context["flagbot"] = services
        return await next()

    app.command("/flagbot")(on_command)
    app.event("app_mention")(on_mention)
    app.action(re.compile(r"^flagbot_"))(on_action)
    app.error(on_error)


async def on_error(error: Exception, body: dict[str, Any], client: Any, logger: Any) -> None:
    """The one error handler for what escapes a listener: a known error becomes its own message,
    anything else an error id (logged with the traceback) the user can quote."""
    from bot.commands import CommandError
    from bot.slack.services import error_id

    user = (body.get("user") or {}).get("id") or body.get("user_id") or (body.get("event") or {}).get("user")
    channel = (
        (body.get("channel") or {}).get("id")
        or body.get("channel_id")
        or (body.get("event") or {}).get("channel")
    )
    if isinstance(error, CommandError | LookupError | ValueError):
        text = error.render() if isinstance(error, CommandError) else str(error)
    else:
        ident = error_id()
        logger.exception("flagbot error %s", ident, exc_info=error)
        text = f"something went wrong (error id {ident}); the log has the details"
    if user and channel:
        await client.chat_postEphemeral(channel=channel, user=user, text=text)


async def serve_http(app: AsyncApp, host: str, port: int) -> Any:
    """Start the aiohttp server for HTTP mode; returns the runner (`await runner.cleanup()`)."""
    from aiohttp import web

    runner = web.AppRunner(app.web_app(path=EVENTS_PATH))
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner
