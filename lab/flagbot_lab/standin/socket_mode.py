"""The stand-in's side of Socket Mode: tickets, the websocket, envelopes, acks and redelivery.

Socket Mode is how `flagbot serve` talks to Slack by default (no public URL), so the stand-in
speaks it as Slack documents it: the app calls `apps.connections.open` with its app-level
token (`xapp-…`) and gets a `ws://…/socket-mode?ticket=…` URL whose ticket works once; the
websocket greets with `{"type": "hello"}`, then carries envelopes `{"envelope_id", "type":
"slash_commands" | "events_api" | "interactive", "payload", "accepts_response_payload"}` that
the app acknowledges with `{"envelope_id"[, "payload"]}` (a slash command's immediate answer).

An app may hold several connections (Slack allows up to ten per app; two `flagbot serve`
replicas hold one each): every envelope goes to exactly one live connection, spread over them in
turn, as Slack spreads them. The turn starts at the newest connection whenever one opens, so the
next envelope after a (re)connect goes there, then the others follow in order of opening.

What a dropped connection does is the point of testing it: an envelope not yet acknowledged
when its connection goes is sent again (with `retry_attempt`) on the next connection, so a
command is never lost. Real Slack retries only Events API envelopes (after a 3 s timeout too);
the stand-in redelivers every type, only after a reconnect, which is the harder case for a bot
(it must not act twice). Tests drop the connection on demand: `disconnect()` (Slack's
`refresh_requested` message), `drop()` (the connection closed without a close handshake) and
`drop_after_send()` (closed right after the next envelope went out, before its ack can come).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from aiohttp import WSMsgType, web

from flagbot_lab.standin.model import APP_ID
from flagbot_lab.standin.workspace import SlackError

EnvelopeType = Literal["slash_commands", "events_api", "interactive"]
PATH = "/socket-mode"
RETRY_REASON = "connection_lost"
"""The stand-in's `retry_reason` for an envelope whose connection went before its ack."""


@dataclass(frozen=True)
class Envelope:
    """One delivery attempt: what goes over the websocket, kept to redeliver it."""

    envelope_id: str
    type: EnvelopeType
    payload: dict[str, Any]
    accepts_response_payload: bool
    retry_attempt: int = 0
    retry_reason: str = ""

    @classmethod
    def new(cls, type: EnvelopeType, payload: dict[str, Any], *, accepts_response_payload: bool) -> Envelope:
        return cls(str(uuid.uuid4()), type, payload, accepts_response_payload)

    def message(self) -> dict[str, Any]:
        """The websocket message; Events API envelopes always carry the retry fields, as Slack's do."""
        out: dict[str, Any] = {
            "envelope_id": self.envelope_id,
            "type": self.type,
            "payload": self.payload,
            "accepts_response_payload": self.accepts_response_payload,
        }
        if self.type == "events_api" or self.retry_attempt:
            out.update(retry_attempt=self.retry_attempt, retry_reason=self.retry_reason)
        return out

    @property
    def url(self) -> str:
        """Where it went, for records that name a URL (an HTTP request's is /slack/events)."""
        return f"socket-mode:{self.envelope_id}"

    @property
    def body(self) -> bytes:
        """The message as sent (an HTTP request's body is its form or JSON)."""
        return json.dumps(self.message()).encode()

    def retried(self, retry_attempt: int, reason: str = RETRY_REASON) -> Envelope:
        """The same envelope (same id and payload) marked as the n-th retry."""
        return replace(self, retry_attempt=retry_attempt, retry_reason=reason)


@dataclass(frozen=True)
class Ack:
    """One acknowledgement from the app; `first` is False for a late duplicate (Slack ignores it)."""

    envelope_id: str
    payload: dict[str, Any] | None
    at: float
    connection: int
    elapsed_s: float
    first: bool


@dataclass
class _Connection:
    number: int
    ws: web.WebSocketResponse
    request: web.Request
    draining: bool = False


@dataclass
class _Pending:
    envelope: Envelope
    done: asyncio.Future[Ack]
    started: float
    on: _Connection | None = None
    attempts: int = 0


@dataclass
class SocketMode:
    """Socket Mode for one app-level token; the stand-in's server routes `apps.connections.open`
    and `GET /socket-mode` here and sends envelopes through `deliver`."""

    app_token: str
    notify: Callable[[], Awaitable[None]]
    _tickets: set[str] = field(default_factory=set)
    _connections: list[_Connection] = field(default_factory=list)
    _pending: dict[str, _Pending] = field(default_factory=dict)
    _acks: list[Ack] = field(default_factory=list)
    _sent: list[Envelope] = field(default_factory=list)
    _sent_on: list[int] = field(default_factory=list)
    _opened: int = 0
    _turn: int = 0
    """How many envelopes were sent since the newest connection opened: picks the next one."""
    _drop_after: int = 0
    _closing: bool = False
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    # ---- the Web API method and the websocket

    def open_connection(self, token: str | None, base_url: str) -> dict[str, Any]:
        """`apps.connections.open`: a single-use websocket URL for the app-level token."""
        if token is None:
            raise SlackError("not_authed")
        if not token.startswith("xapp-"):
            raise SlackError("not_allowed_token_type")
        if token != self.app_token:
            raise SlackError("invalid_auth")
        ticket = secrets.token_urlsafe(16)
        self._tickets.add(ticket)
        return {"ok": True, "url": "ws" + base_url.removeprefix("http") + f"{PATH}?ticket={ticket}"}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """One websocket: the ticket (used up), hello, owed envelopes, then the app's acks."""
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.json_response({"ok": False, "error": "invalid_ticket"}, status=401)
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse()  # answers the app's pings itself
        await ws.prepare(request)
        self._opened += 1
        conn = _Connection(self._opened, ws, request)
        self._connections.append(conn)
        self._turn = 0
        try:
            await ws.send_json(self._hello())
            await self._dispatch()
            await self._changed_now()
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    await self._on_text(conn, message.data)
        finally:
            self._connections.remove(conn)
            for pending in self._pending.values():
                if pending.on is conn:
                    pending.on = None
            if not self._closing:
                await self._dispatch()
                await self._changed_now()
        return ws

    def _hello(self) -> dict[str, Any]:
        return {
            "type": "hello",
            "num_connections": len(self._connections),
            "connection_info": {"app_id": APP_ID},
            "debug_info": {"host": "standin", "build_number": 1, "approximate_connection_time": 3600},
        }

    async def _on_text(self, conn: _Connection, data: str) -> None:
        try:
            message = json.loads(data)
        except json.JSONDecodeError:
            return  # Slack ignores what is not an ack
        if not isinstance(message, dict) or not isinstance(message.get("envelope_id"), str):
            return
        envelope_id = message["envelope_id"]
        pending = self._pending.pop(envelope_id, None)
        payload = message.get("payload")
        now = time.perf_counter()
        ack = Ack(
            envelope_id,
            payload if isinstance(payload, dict) else None,
            time.time(),
            conn.number,
            now - pending.started if pending else 0.0,
            first=pending is not None,
        )
        self._acks.append(ack)
        if pending is not None and not pending.done.done():
            pending.done.set_result(ack)
        await self._changed_now()

    async def _changed_now(self) -> None:
        async with self._changed:
            self._changed.notify_all()
        await self.notify()

    # ---- sending

    def _live(self) -> list[_Connection]:
        return [c for c in self._connections if not c.draining and not c.ws.closed]

    def _next_live(self) -> _Connection | None:
        """The connection the next envelope goes to: the newest first, then each in turn."""
        live = self._live()
        if not live:
            return None
        chosen = live[(len(live) - 1 + self._turn) % len(live)]
        self._turn += 1
        return chosen

    async def _dispatch(self) -> None:
        """Send every envelope no live connection carries; a resent one is marked as a retry."""
        for pending in list(self._pending.values()):
            if not self._live():
                return
            if pending.on is not None or pending.done.done():
                continue
            conn = self._next_live()
            assert conn is not None
            if pending.attempts:
                pending.envelope = pending.envelope.retried(pending.attempts)
            pending.on, pending.attempts = conn, pending.attempts + 1
            self._sent.append(pending.envelope)
            self._sent_on.append(conn.number)
            try:
                await conn.ws.send_json(pending.envelope.message())
            except ConnectionError:
                pending.on = None
                continue
            if self._drop_after > 0:
                self._drop_after -= 1
                self._close_transport(conn)

    async def deliver(self, envelope: Envelope, *, timeout: float = 30.0) -> Ack:
        """Send `envelope` (now, or once an app is connected) and wait for its first ack."""
        pending = _Pending(envelope, asyncio.get_running_loop().create_future(), time.perf_counter())
        self._pending[envelope.envelope_id] = pending
        await self._dispatch()
        try:
            return await asyncio.wait_for(asyncio.shield(pending.done), timeout)
        except TimeoutError:
            self._pending.pop(envelope.envelope_id, None)
            raise TimeoutError(
                f"no ack for {envelope.type} envelope {envelope.envelope_id} within {timeout}s "
                f"({len(self._connections)} connection(s) open)"
            ) from None

    # ---- dropping connections (tests)

    async def disconnect(self, reason: str = "refresh_requested") -> int:
        """Tell every connection to go (Slack's `disconnect` message); nothing new is sent on them.
        Returns how many were told."""
        told = [c for c in self._connections if not c.draining]
        for conn in told:
            conn.draining = True
            await conn.ws.send_json(
                {"type": "disconnect", "reason": reason, "debug_info": {"host": "standin"}}
            )
        return len(told)

    def drop(self) -> int:
        """Close every connection at once without a close handshake; returns how many."""
        dropped = list(self._connections)
        for conn in dropped:
            self._close_transport(conn)
        return len(dropped)

    def drop_after_send(self, times: int = 1) -> None:
        """Close the connection right after each of the next `times` envelopes goes out on it:
        the app gets the envelope but its ack cannot arrive."""
        self._drop_after += times

    def _close_transport(self, conn: _Connection) -> None:
        conn.draining = True
        transport = conn.request.transport
        if transport is not None:
            transport.close()  # what was written goes out, then the TCP connection ends

    async def close(self) -> None:
        """Stop: close every connection (the server then stops at once) and give up on acks."""
        self._closing = True
        self.drop()
        for pending in self._pending.values():
            if not pending.done.done():
                pending.done.cancel()
        self._pending.clear()

    # ---- what tests ask

    @property
    def connected(self) -> bool:
        """Whether an app holds a connection that takes envelopes."""
        return bool(self._live())

    @property
    def live_connections(self) -> int:
        """How many connections take envelopes now (two replicas: two)."""
        return len(self._live())

    @property
    def connections_opened(self) -> int:
        """How many websockets were opened so far (a reconnect adds one)."""
        return self._opened

    def acks(self, envelope_id: str | None = None) -> list[Ack]:
        """Every ack received (duplicates too), oldest first; or one envelope's."""
        return [a for a in self._acks if envelope_id is None or a.envelope_id == envelope_id]

    def envelopes(self, envelope_id: str | None = None) -> list[Envelope]:
        """Every envelope sent over a websocket, each attempt, oldest first; or one envelope's."""
        return [e for e in self._sent if envelope_id is None or e.envelope_id == envelope_id]

    def sent_on(self, envelope_id: str | None = None) -> list[int]:
        """The connection number each attempt went out on, in the order of `envelopes()`."""
        return [
            n for e, n in zip(self._sent, self._sent_on, strict=True) if envelope_id in (None, e.envelope_id)
        ]

    def unacked(self) -> list[Envelope]:
        """Envelopes still waiting for their ack."""
        return [p.envelope for p in self._pending.values()]

    async def wait_connected(self, opened: int = 1, *, live: int = 1, timeout: float = 10.0) -> None:
        """Wait until at least `opened` websockets were opened and `live` of them take envelopes."""

        def ready() -> bool:
            return self._opened >= opened and self.live_connections >= live

        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(ready), timeout)
            except TimeoutError:
                raise TimeoutError(
                    f"not {live} live Socket Mode connection(s) within {timeout}s "
                    f"({self._opened} opened so far, {self.live_connections} live)"
                ) from None
