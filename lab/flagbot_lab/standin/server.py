"""The stand-in's HTTP server: Slack's Web API for the bot, and Slack's requests to the bot.

One aiohttp application serves `/api/<method>`, the upload URLs of files_upload_v2, the
response_urls handed to the bot and Socket Mode's websocket; the same object sends slash
commands, mentions and clicks to the bot: as Socket Mode envelopes when the bot is connected
that way (or the stand-in was started with `socket_mode=True`), else as signed requests to the
bot's `/slack/events`. Tests and `make demo` use it in place of slack.com, so everything runs
on loopback with no Slack workspace.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from flagbot_lab.standin.files import receive_upload
from flagbot_lab.standin.model import Channel, User
from flagbot_lab.standin.outbound import (
    Delivery,
    Response,
    Signing,
    SlashInThreadError,
    click_body,
    mention_callback,
    mention_text,
    signed,
    slash_fields,
)
from flagbot_lab.standin.page import page_routes
from flagbot_lab.standin.params import Params
from flagbot_lab.standin.recording import Call, ResponsePost, ResponseTarget, ack_message, apply_response
from flagbot_lab.standin.socket_mode import PATH as SOCKET_PATH
from flagbot_lab.standin.socket_mode import Envelope, EnvelopeType, SocketMode
from flagbot_lab.standin.state import StandinState
from flagbot_lab.standin.webapi import METHODS
from flagbot_lab.standin.workspace import SlackError

FORM = "application/x-www-form-urlencoded"
SCOPES = "app_mentions:read,channels:history,chat:write,commands,files:write,groups:history,usergroups:read,users:read"


class Standin(StandinState):
    """A local Slack: Web API, file uploads, response_urls, and requests to the bot (signed HTTP
    requests, or Socket Mode envelopes once the bot connects with `app_token`)."""

    def __init__(
        self,
        signing_secret: str,
        bot_url: str | None = None,
        *,
        bot_token: str = "xoxb-standin",  # noqa: S107  (a stand-in's made-up token)
        app_token: str = "xapp-standin",  # noqa: S107  (the app-level token of Socket Mode)
        socket_mode: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        bot_timeout_s: float = 30.0,
    ) -> None:
        self.signing_secret = signing_secret
        self.bot_url = bot_url
        self.bot_token = bot_token
        self.socket_mode = socket_mode
        super().__init__()
        self.socket = SocketMode(app_token, self._notify)
        self._host, self._port, self._bot_timeout_s = host, port, bot_timeout_s
        self._rate_limits: dict[str, int] = {}
        self._failures: dict[str, tuple[str, int]] = {}
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._base: str | None = None

    # ---- lifecycle

    async def start(self) -> str:
        """Listen (port 0: any free port) and return the base URL, e.g. http://127.0.0.1:PORT."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/upload/v1/{file_id}", self._upload)
        app.router.add_post("/response/{key}", self._response_url)
        app.router.add_get(SOCKET_PATH, self.socket.handle)
        page_routes(app, self)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self._base = f"http://{host}:{port}"
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._bot_timeout_s))
        return self._base

    async def stop(self) -> None:
        """Stop listening and close the client session to the bot; safe to call twice."""
        await self.socket.close()
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Standin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        """Where the stand-in listens (after start())."""
        if self._base is None:
            raise RuntimeError("the stand-in is not started")
        return self._base

    @property
    def api_url(self) -> str:
        """What `AsyncWebClient(base_url=...)` takes: `<base>/api/`."""
        return f"{self.base_url}/api/"

    # ---- Web API

    def rate_limit(self, method: str, times: int = 1) -> None:
        """Answer the next `times` calls of `method` with HTTP 429 and `Retry-After: 1`."""
        self._rate_limits[method] = self._rate_limits.get(method, 0) + times

    def fail(self, method: str, error: str = "internal_error", times: int = 1) -> None:
        """Answer the next `times` calls of `method` with `{"ok": false, "error": error}` (HTTP 200,
        as Slack answers an error that a retry does not cure: fatal_error, channel_not_found, ...)."""
        self._failures[method] = (error, self._failures.get(method, (error, 0))[1] + times)

    async def _params(self, request: web.Request) -> dict[str, Any]:
        values: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            body = await request.json()
            if not isinstance(body, dict):
                raise SlackError("invalid_json")
            values.update(body)
        elif request.content_type in (FORM, "multipart/form-data"):
            form = await request.post()
            values.update({k: v for k, v in form.items() if isinstance(v, str)})
        return values

    def _token(self, request: web.Request, values: dict[str, Any]) -> str | None:
        header = request.headers.get("Authorization", "")
        token = values.pop("token", None)
        if header.startswith("Bearer "):
            return header.removeprefix("Bearer ").strip()
        return None if token is None else str(token)

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        values: dict[str, Any] = {}
        status, headers = 200, {"X-OAuth-Scopes": SCOPES}
        try:
            values = await self._params(request)
            token = self._token(request, values)
            if self._rate_limits.get(method, 0) > 0:
                self._rate_limits[method] -= 1
                status, headers["Retry-After"] = 429, "1"
                raise SlackError("ratelimited")
            error, left = self._failures.get(method, ("", 0))
            if left > 0:
                self._failures[method] = (error, left - 1)
                raise SlackError(error)
            if method == "apps.connections.open":
                answer = self.socket.open_connection(token, self.base_url)
            else:
                answer = self._method(method, token, values)
        except SlackError as err:
            answer = {"ok": False, "error": err.code, **err.extra}
        except json.JSONDecodeError:
            answer = {"ok": False, "error": "invalid_json"}
        self._calls.append(Call(method, values, time.time(), status, answer))
        await self._notify()
        return web.json_response(answer, status=status, headers=headers)

    def _method(self, method: str, token: str | None, values: dict[str, Any]) -> dict[str, Any]:
        handler = METHODS.get(method)
        if handler is None:
            raise SlackError("unknown_method")
        if token is None:
            raise SlackError("not_authed")
        if token.startswith("xapp-"):
            raise SlackError("not_allowed_token_type")  # the app-level token opens connections only
        if token != self.bot_token:
            raise SlackError("invalid_auth")
        return handler(self.workspace, Params(values), self.base_url)

    async def _upload(self, request: web.Request) -> web.Response:
        status, text = receive_upload(self.workspace, request.match_info["file_id"], await request.read())
        await self._notify()
        return web.Response(status=status, text=text, content_type="text/plain")

    async def _response_url(self, request: web.Request) -> web.Response:
        target = self._targets.get(request.match_info["key"])
        if target is None:
            return web.json_response({"ok": False, "error": "expired_url"}, status=404)
        body = await request.json()
        self._responses.append(ResponsePost(str(request.url), body, time.time(), target))
        try:
            apply_response(self.workspace, target, body)
        except SlackError as err:
            return web.json_response({"ok": False, "error": err.code}, status=404)
        finally:
            await self._notify()
        return web.json_response({"ok": True})

    # ---- requests to the bot

    def _user(self, user_id: str) -> User:
        if user_id not in self.workspace.users:
            raise KeyError(f"no user {user_id!r} in the stand-in (add it with workspace.add_user)")
        return self.workspace.users[user_id]

    def _channel(self, ref: str) -> Channel:
        try:
            return self.workspace.channel(ref)
        except SlackError:
            raise KeyError(
                f"no channel {ref!r} in the stand-in (add it with workspace.add_channel)"
            ) from None

    def _response_url_for(self, target: ResponseTarget) -> str:
        key = uuid.uuid4().hex
        self._targets[key] = target
        return f"{self.base_url}/response/{key}"

    @property
    def events_url(self) -> str:
        """Where everything goes: Bolt's default path under the bot's URL."""
        if self.bot_url is None:
            raise RuntimeError("the stand-in has no bot_url to send to")
        return self.bot_url.rstrip("/") + "/slack/events"

    @property
    def over_socket(self) -> bool:
        """Whether requests go as Socket Mode envelopes (started so, or an app is connected)."""
        return self.socket_mode or self.socket.connected

    async def send(self, request: Delivery) -> Response:
        """Send one request to the bot as is and time the answer (an envelope: until its ack)."""
        if self._session is None:
            raise RuntimeError("the stand-in is not started")
        self._sent.append(request)
        if isinstance(request, Envelope):
            ack = await self.socket.deliver(request, timeout=self._bot_timeout_s)
            body = "" if ack.payload is None else json.dumps(ack.payload)
            headers = {"Content-Type": "application/json"} if ack.payload is not None else {}
            return Response(200, body, ack.elapsed_s, request, headers)
        started = time.perf_counter()
        async with self._session.post(request.url, data=request.body, headers=request.headers()) as answer:
            body = await answer.text()
            status, headers = answer.status, dict(answer.headers)
        return Response(status, body, time.perf_counter() - started, request, headers)

    def _request(
        self, kind: EnvelopeType, payload: dict[str, Any], body: bytes, content_type: str, signing: Signing
    ) -> Delivery:
        """The envelope (Socket Mode: no signature, the connection is the app's) or the signed request."""
        if not self.over_socket:
            return signed(self.events_url, body, content_type, self.signing_secret, signing)
        if signing != "valid":
            raise ValueError(f"signing={signing!r}: Socket Mode envelopes are not signed (HTTP mode only)")
        return Envelope.new(kind, payload, accepts_response_payload=kind == "slash_commands")

    async def slash(
        self,
        text: str,
        *,
        user: str,
        channel: str,
        thread_ts: str | None = None,
        command: str = "/flagbot",
        signing: Signing = "valid",
    ) -> Response:
        """Type `command text` in a channel; in a thread Slack refuses it (SlashInThreadError).

        A message in the bot's HTTP answer is shown as Slack shows it (plain text: ephemeral).
        """
        if thread_ts is not None:
            raise SlashInThreadError(command)
        who, chan = self._user(user), self._channel(channel)
        target = ResponseTarget(chan.id, who.id)
        response_url = self._response_url_for(target)
        fields = slash_fields(command=command, text=text, user=who, channel=chan, response_url=response_url)
        # a Socket Mode envelope is JSON, which carries any text (a lone surrogate too); a form only UTF-8
        form = b"" if self.over_socket else urlencode(fields).encode()
        answer = await self.send(self._request("slash_commands", dict(fields), form, FORM, signing))
        shown = (
            ack_message(answer.body, answer.headers.get("Content-Type", "")) if answer.status == 200 else None
        )
        if shown is not None:
            self._responses.append(ResponsePost(answer.request.url, shown, time.time(), target, via="ack"))
            apply_response(self.workspace, target, shown)
            await self._notify()
        return answer

    async def mention(
        self, text: str, *, user: str, channel: str, thread_ts: str | None = None, signing: Signing = "valid"
    ) -> Response:
        """Post `@flagbot text` as `user` (into the model) and deliver the app_mention event."""
        who, chan = self._user(user), self._channel(channel)
        message = self.workspace.post(chan.id, user=who.id, text=mention_text(text), thread_ts=thread_ts)
        await self._notify()
        callback = mention_callback(message)
        body = json.dumps(callback).encode()
        return await self.send(self._request("events_api", callback, body, "application/json", signing))

    async def click(
        self, channel: str, message_ts: str, action_id: str, *, user: str, signing: Signing = "valid"
    ) -> Response:
        """Click the button `action_id` of a stored message (KeyError when it has none)."""
        who, chan = self._user(user), self._channel(channel)
        try:
            message = self.workspace.message(chan.id, message_ts)
        except SlackError:
            raise KeyError(f"no message {message_ts} in {chan.id}") from None
        target = ResponseTarget(chan.id, who.id, message_ts=message.ts, thread_ts=message.thread_ts)
        response_url = self._response_url_for(target)
        payload = click_body(message, action_id, user=who, channel=chan, response_url=response_url)
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return await self.send(self._request("interactive", payload, body, FORM, signing))

    async def redeliver(
        self, request: Delivery | None = None, *, retry_num: int = 1, reason: str = "http_timeout"
    ) -> Response:
        """Send a request again byte for byte, marked as Slack's retry (`X-Slack-Retry-Num`); an
        envelope again with its id and payload, with `retry_attempt` and `retry_reason`."""
        return await self.send((request or self.last_request).retried(retry_num, reason))
