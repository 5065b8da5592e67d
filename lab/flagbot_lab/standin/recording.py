"""What the stand-in records: every Web API call and every response_url reply.

Recording the calls (and not only the resulting messages) lets tests check the things a
message model cannot show: that a retry really happened after a 429, or that the bot did
not call chat.postMessage twice for one redelivered event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from flagbot_lab.standin.workspace import Workspace


@dataclass(frozen=True)
class Call:
    """One Web API call: the method, its merged arguments, when, and what was answered."""

    method: str
    params: dict[str, Any]
    at: float
    status: int = 200
    response: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """Whether Slack would have answered `"ok": true`."""
        return self.status == 200 and bool((self.response or {}).get("ok"))


@dataclass(frozen=True)
class ResponseTarget:
    """Where a response_url points: the channel and user of the request, and the clicked message."""

    channel: str
    user: str
    message_ts: str | None = None
    thread_ts: str | None = None


@dataclass(frozen=True)
class ResponsePost:
    """One message the bot sent in answer to a request: to a response_url, or in its ack.

    `via` is "response_url", or "ack" for the body of a slash command's HTTP answer, which
    Slack shows like a response_url message (plain text: ephemeral to the user).
    """

    url: str
    body: dict[str, Any]
    at: float
    target: ResponseTarget
    via: str = "response_url"


def ack_message(body: str, content_type: str) -> dict[str, Any] | None:
    """The message in a slash command's immediate answer, if any (JSON, or plain text)."""
    if not body.strip():
        return None
    if content_type.startswith("application/json"):
        try:
            parsed = json.loads(body)
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) and (parsed.get("text") or parsed.get("blocks")) else None
    return {"text": body}


def apply_response(ws: Workspace, target: ResponseTarget, body: dict[str, Any]) -> None:
    """Do what Slack does with a response_url message.

    `delete_original` / `replace_original` act on the clicked message; `response_type:
    in_channel` posts for everyone; anything else is ephemeral to the user who asked. A
    SlackError (the original is gone) is answered to the bot with 404, as Slack does.
    """
    text = str(body.get("text") or "")
    blocks = body.get("blocks")
    if target.message_ts and body.get("delete_original"):
        ws.delete(target.channel, target.message_ts)
        return
    if target.message_ts and body.get("replace_original"):
        ws.update(target.channel, target.message_ts, text=text, blocks=blocks or [], metadata=None)
        return
    thread_ts = body.get("thread_ts") or target.thread_ts
    if body.get("response_type") == "in_channel":
        ws.post(target.channel, text=text, blocks=blocks, thread_ts=thread_ts)
    else:
        ws.ephemeral(target.channel, target.user, text=text, blocks=blocks, thread_ts=thread_ts)
