"""The Slack app: a factory (no global app), its listeners, and the two ways to serve it.

`build_app` makes a slack-bolt `AsyncApp` and `register_listeners` wires the handlers, so tests
build as many apps as they like. HTTP mode (`flagbot serve --http HOST:PORT`) verifies every
request's signature (Bolt does, with the signing secret); Socket Mode (the default: no public
URL) connects out with the app-level token. Both run in one event loop with the engine's runs.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import run_async_bolt_app, send_async_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.response import BoltResponse
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.commands import CommandError
from bot.redaction import redact, redact_data
from bot.slack.buttons import on_action
from bot.slack.dispatch import preload
from bot.slack.handlers import on_command, on_mention
from bot.slack.services import SlackServices, error_id

EVENTS_PATH = "/slack/events"


class RedactingWebClient(AsyncWebClient):
    """The Web API client every Slack message and file of flagbot's goes through: the one place
    secrets are masked on the way to Slack (`bot.redaction`, docs/security.md#secrets)."""

    async def _send(self, http_verb: str, api_url: str, req_args: dict[str, Any]) -> AsyncSlackResponse:
        """Every Web API call passes here (slack_sdk's `api_call` builds `req_args`, then sends)."""
        masked = dict(req_args)
        for key in ("json", "data", "params"):
            if isinstance(masked.get(key), dict):
                redact_data(masked[key])  # first learn every secret the message names, in any part
                masked[key] = redact_data(masked[key])
        return await super()._send(http_verb, api_url, masked)

    async def files_upload_v2(self, **kwargs: object) -> AsyncSlackResponse:
        args: dict[str, Any] = dict(kwargs)
        for key in ("content", "title", "initial_comment", "filename"):
            if isinstance(args.get(key), str):
                args[key] = redact(args[key])
        return await super().files_upload_v2(**args)


def redacting(client: AsyncWebClient) -> AsyncWebClient:
    """`client`, made a RedactingWebClient in place (it adds no state, only the masking), so
    every setting Bolt gave it (token, address, session, retry handlers) stays."""
    if not isinstance(client, RedactingWebClient) and type(client) is AsyncWebClient:
        client.__class__ = RedactingWebClient
    return client


def web_client(token: str, *, base_url: str | None = None) -> AsyncWebClient:
    """A Web API client that waits out 429s (Slack's rate limits) instead of failing the run,
    and masks secrets in whatever it sends."""
    client = RedactingWebClient(token=token, base_url=base_url or AsyncWebClient.BASE_URL)
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=3))
    return client


def build_app(
    services: SlackServices, *, token: str, signing_secret: str, client: AsyncWebClient | None = None
) -> AsyncApp:
    """A new app for `services`; `client` points elsewhere than slack.com (the stand-in)."""
    app = AsyncApp(
        token=token,
        signing_secret=signing_secret,
        client=redacting(client) if client is not None else web_client(token),
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
    async def with_services(
        context: AsyncBoltContext, next: Callable[[], Awaitable[BoltResponse]]
    ) -> BoltResponse:
        context["flagbot"] = services
        redacting(context.client)  # Bolt builds a client per request: it masks secrets too
        return await next()

    app.command("/flagbot")(on_command)
    app.event("app_mention")(on_mention)
    app.action(re.compile(r"^flagbot_"))(on_action)
    app.error(on_error)


async def on_error(
    error: Exception, body: dict[str, Any], client: AsyncWebClient, logger: logging.Logger
) -> None:
    """The one error handler for what escapes a listener: a known error becomes its own message,
    anything else an error id (logged with the traceback) the user can quote."""
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


async def serve_http(app: AsyncApp, host: str, port: int) -> web.AppRunner:
    """Start the aiohttp server for HTTP mode; returns the runner (`await runner.cleanup()`)."""
    runner = web.AppRunner(app.web_app(path=EVENTS_PATH))
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner


class OnceSocketModeHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler, acting once per delivery.

    An envelope is sent again when its connection dropped before the ack arrived, though the
    bot may have received it and acted (a `try` started, help posted). The redelivery gets the
    first delivery's answer as its ack (a usage error's text is not lost with the ack) and the
    listener does not run again. The key is what Slack keeps across deliveries: the trigger id
    of a command or click, the event id of an event; the last MEMORY deliveries are kept. After
    a restart that memory is empty: the listeners' own keys in the store (`first_delivery`)
    then answer a redelivered command with "delivered before" and run nothing.
    """

    MEMORY = 1000

    def __init__(self, app: AsyncApp, app_token: str, *, ping_interval: float = 10) -> None:
        super().__init__(app, app_token, ping_interval=ping_interval)
        self._answers: OrderedDict[str, asyncio.Future[BoltResponse]] = OrderedDict()

    async def handle(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        start = asyncio.get_running_loop().time()
        key = delivery_key(req)
        answer = self._answers.get(key)
        if answer is None:
            answer = asyncio.ensure_future(run_async_bolt_app(self.app, req))
            self._answers[key] = answer
            while len(self._answers) > self.MEMORY:
                self._answers.popitem(last=False)
        response = await asyncio.shield(answer)
        await send_async_response(client, req, response, start)


def delivery_key(req: SocketModeRequest) -> str:
    """What identifies one delivery across retries (the envelope id when the payload has nothing)."""
    payload = req.payload
    ident = payload.get("event_id") if req.type == "events_api" else payload.get("trigger_id")
    return f"{req.type}:{ident or req.envelope_id}"


async def serve_socket(
    app: AsyncApp, app_token: str, *, ping_interval: float = 10.0
) -> OnceSocketModeHandler:
    """Connect to Slack in Socket Mode (`apps.connections.open` goes to the app's Web API client,
    so to the stand-in when the client points there); returns the handler (`await
    handler.close_async()`). The client reconnects by itself after a drop or Slack's `disconnect`."""
    handler = OnceSocketModeHandler(app, app_token, ping_interval=ping_interval)
    await handler.connect_async()  # type: ignore[no-untyped-call]
    return handler
