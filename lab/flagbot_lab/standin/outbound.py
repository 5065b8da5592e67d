"""Requests to the bot exactly as Slack sends them over HTTP: bodies, fields and signatures.

Slack signs `v0:{timestamp}:{raw body}` with the app's signing secret (HMAC-SHA256) and
sends `X-Slack-Signature: v0=<hex>` and `X-Slack-Request-Timestamp`; Bolt refuses (401) a
wrong signature or a timestamp more than 5 minutes old. The payload shapes here follow
what Slack sends for a slash command (form fields), an Events API `app_mention` (JSON) and
a `block_actions` click (form field `payload` holding JSON).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, Literal
from urllib.parse import urlencode

from bot.slack.render_tables import escape as slack_escape
from flagbot_lab.standin.blocks import buttons
from flagbot_lab.standin.model import APP_ID, BOT_USER_ID, TEAM_DOMAIN, TEAM_ID, Channel, Message, User
from flagbot_lab.standin.socket_mode import Envelope

VERIFICATION_TOKEN = "standin-verification-token"  # noqa: S105  (Slack's deprecated, public field)
STALE_AFTER_S = 5 * 60
Signing = Literal["valid", "wrong", "stale", "unsigned"]


class SlashInThreadError(Exception):
    """Slack does not send slash commands typed in a thread; it shows the user this instead."""

    def __init__(self, command: str) -> None:
        super().__init__(f"{command} is not supported in threads. Sorry!")
        self.command = command


@dataclass(frozen=True)
class BotRequest:
    """One request to the bot, kept whole so it can be sent again byte for byte."""

    url: str
    body: bytes
    content_type: str
    timestamp: str
    signature: str | None
    retry_num: int | None = None
    retry_reason: str | None = None

    def headers(self) -> dict[str, str]:
        """The HTTP headers Slack sends with it (signature and retry headers included)."""
        headers = {
            "Content-Type": self.content_type,
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        }
        if self.signature is not None:
            headers["X-Slack-Signature"] = self.signature
            headers["X-Slack-Request-Timestamp"] = self.timestamp
        if self.retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(self.retry_num)
            headers["X-Slack-Retry-Reason"] = self.retry_reason or "http_timeout"
        return headers

    def retried(self, retry_num: int = 1, reason: str = "http_timeout") -> BotRequest:
        """The same body and signature marked as Slack's n-th retry."""
        return replace(self, retry_num=retry_num, retry_reason=reason)


Delivery = BotRequest | Envelope
"""What the stand-in sends the bot: a signed HTTP request, or a Socket Mode envelope."""


@dataclass(frozen=True)
class Response:
    """The bot's answer to one request, and how long it took (Slack gives up after 3 s).

    Over Socket Mode the answer is the envelope's ack: status 200, the ack's `payload` as a
    JSON body (empty when it has none), and the time from sending the envelope to its ack.
    """

    status: int
    body: str
    elapsed_s: float
    request: Delivery
    headers: dict[str, str]

    def json(self) -> Any:
        """The body parsed as JSON (a slash command's immediate reply, for instance)."""
        return json.loads(self.body) if self.body else None


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: `v0=` + HMAC-SHA256 of `v0:{timestamp}:{body}`."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signed(url: str, body: bytes, content_type: str, secret: str, signing: Signing = "valid") -> BotRequest:
    """A request signed as Slack signs it, or deliberately not (for the security tests)."""
    now = int(time.time())
    timestamp = str(now - 2 * STALE_AFTER_S if signing == "stale" else now)
    key = secret + "-wrong" if signing == "wrong" else secret
    sig = None if signing == "unsigned" else signature(key, timestamp, body)
    return BotRequest(url=url, body=body, content_type=content_type, timestamp=timestamp, signature=sig)


def trigger_id() -> str:
    """A trigger id in Slack's shape (opening a modal is not modelled)."""
    return f"{int(time.time())}.{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex}"


def slash_fields(
    *, command: str, text: str, user: User, channel: Channel, response_url: str
) -> dict[str, str]:
    """A slash command's fields, field for field (the HTTP form body, or a Socket Mode payload)."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": TEAM_ID,
        "team_domain": TEAM_DOMAIN,
        "channel_id": channel.id,
        "channel_name": channel.name,
        "user_id": user.id,
        "user_name": user.name,
        "command": command,
        "text": slack_escape(text),  # Slack escapes &, < and > in what the user typed
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id(),
    }


def slash_form(*, command: str, text: str, user: User, channel: Channel, response_url: str) -> bytes:
    """The form body of a slash command over HTTP."""
    fields = slash_fields(command=command, text=text, user=user, channel=channel, response_url=response_url)
    return urlencode(fields).encode()


def _authorizations() -> list[dict[str, Any]]:
    return [
        {
            "enterprise_id": None,
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "is_bot": True,
            "is_enterprise_install": False,
        }
    ]


def mention_text(text: str) -> str:
    """The text as typed with the bot mentioned (`<@U…>` prepended unless already there)."""
    tag = f"<@{BOT_USER_ID}>"
    if tag in text:  # already written with the mention markup: escape around it
        return tag.join(slack_escape(part) for part in text.split(tag))
    return f"{tag} {slack_escape(text)}"


def mention_callback(message: Message) -> dict[str, Any]:
    """The Events API `event_callback` for an `app_mention` (the user's message already posted)."""
    event: dict[str, Any] = {
        "type": "app_mention",
        "user": message.user,
        "text": message.text,
        "ts": message.ts,
        "channel": message.channel,
        "event_ts": message.ts,
        "team": TEAM_ID,
        "client_msg_id": str(uuid.uuid4()),
        "blocks": message.blocks,
    }
    if message.thread_ts:
        event["thread_ts"] = message.thread_ts
    envelope = {
        "token": VERIFICATION_TOKEN,
        "team_id": TEAM_ID,
        "context_team_id": TEAM_ID,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": "Ev" + uuid.uuid4().hex[:16].upper(),
        "event_time": int(time.time()),
        "authorizations": _authorizations(),
        "is_ext_shared_channel": False,
        "event_context": "4-" + uuid.uuid4().hex,
    }
    return envelope


def find_button(message: Message, action_id: str) -> tuple[str | None, dict[str, Any]]:
    """The button with `action_id` in the message's current blocks, with its block_id."""
    found = [(block_id, b) for block_id, b in buttons(message.blocks) if b.get("action_id") == action_id]
    if not found:
        present = [b.get("action_id") for _, b in buttons(message.blocks)]
        raise KeyError(f"no button {action_id!r} in message {message.ts} (buttons: {present})")
    return found[0]


def click_body(
    message: Message, action_id: str, *, user: User, channel: Channel, response_url: str
) -> dict[str, Any]:
    """The `block_actions` payload of a click on a stored message's button."""
    block_id, button = find_button(message, action_id)
    action: dict[str, Any] = {
        "action_id": action_id,
        "block_id": block_id,
        "text": button.get("text"),
        "type": "button",
        "action_ts": f"{time.time():.6f}",
    }
    for key in ("value", "style", "url"):
        if key in button:
            action[key] = button[key]
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message.ts,
        "channel_id": channel.id,
        "is_ephemeral": False,
    }
    if message.thread_ts:
        container["thread_ts"] = message.thread_ts
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user.id, "username": user.name, "name": user.name, "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "container": container,
        "trigger_id": trigger_id(),
        "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel.id, "name": channel.name},
        "message": message.to_api(),
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [action],
    }
    return payload
