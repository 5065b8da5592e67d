"""The Web API methods: arguments in, Slack's answer out, the workspace changed.

Each method answers with the fields Slack documents and slack_sdk / Bolt read, and with
Slack's own error codes, so a bot that handles Slack's errors handles the stand-in's.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from flagbot_lab.standin.blocks import MAX_MESSAGE_TEXT, block_errors
from flagbot_lab.standin.files import complete_upload_external, get_upload_url_external
from flagbot_lab.standin.model import BOT_ID, BOT_USER_ID, TEAM_DOMAIN, TEAM_ID, Message
from flagbot_lab.standin.params import Params
from flagbot_lab.standin.workspace import SlackError, Workspace

Answer = dict[str, Any]
Method = Callable[[Workspace, Params, str], Answer]


def auth_test(ws: Workspace, p: Params, base: str) -> Answer:
    """Who the token is: Bolt calls this once to learn its bot user id."""
    return {
        "ok": True,
        "url": f"{base}/",
        "team": "flagbot stand-in",
        "user": "flagbot",
        "team_id": TEAM_ID,
        "user_id": BOT_USER_ID,
        "bot_id": BOT_ID,
        "is_enterprise_install": False,
    }


def _blocks(p: Params) -> list[dict[str, Any]] | None:
    blocks = p.obj("blocks")
    if blocks is None:
        return None
    if not isinstance(blocks, list):
        raise SlackError("invalid_blocks_format")
    errors = block_errors(blocks)
    if errors:
        raise SlackError("invalid_blocks", errors=errors, response_metadata={"messages": errors})
    return blocks


def _metadata(p: Params) -> dict[str, Any] | None:
    metadata = p.obj("metadata")
    if metadata is None:
        return None
    ok = (
        isinstance(metadata, dict)
        and isinstance(metadata.get("event_type"), str)
        and isinstance(metadata.get("event_payload"), dict)
    )
    if not ok:
        raise SlackError("invalid_metadata_format")
    return dict(metadata)


def _text(p: Params, blocks: list[dict[str, Any]] | None, *, required: bool) -> str | None:
    text = p.opt("text")
    if required and text is None and not blocks and not p.values.get("attachments"):
        raise SlackError("no_text")
    if text is not None and len(text) > MAX_MESSAGE_TEXT:
        raise SlackError("msg_too_long")
    return text


def chat_post_message(ws: Workspace, p: Params, base: str) -> Answer:
    """Post as the bot; `thread_ts` makes a reply, `reply_broadcast` shows it in the channel too."""
    channel = p.required("channel", error="channel_not_found")
    blocks = _blocks(p)
    text = _text(p, blocks, required=True)
    message = ws.post(
        channel,
        text=text or "",
        blocks=blocks,
        thread_ts=p.opt("thread_ts"),
        metadata=_metadata(p),
        reply_broadcast=p.flag("reply_broadcast"),
    )
    return {"ok": True, "channel": message.channel, "ts": message.ts, "message": message.to_api()}


def chat_update(ws: Workspace, p: Params, base: str) -> Answer:
    """Edit one of the bot's messages; the previous version stays in the message's history."""
    channel = p.required("channel", error="channel_not_found")
    ts = p.required("ts", error="message_not_found")
    blocks = _blocks(p)
    message = ws.update(
        channel, ts, text=_text(p, blocks, required=False), blocks=blocks, metadata=_metadata(p)
    )
    return {
        "ok": True,
        "channel": message.channel,
        "ts": message.ts,
        "text": message.text,
        "message": message.to_api(),
    }


def chat_delete(ws: Workspace, p: Params, base: str) -> Answer:
    """Delete one of the bot's messages."""
    channel = p.required("channel", error="channel_not_found")
    message = ws.delete(channel, p.required("ts", error="message_not_found"))
    return {"ok": True, "channel": message.channel, "ts": message.ts}


def chat_post_ephemeral(ws: Workspace, p: Params, base: str) -> Answer:
    """A message only `user` sees (a refusal, a usage hint)."""
    channel = p.required("channel", error="channel_not_found")
    user = p.required("user", error="user_not_in_channel")
    if user not in ws.users:
        raise SlackError("user_not_in_channel")
    blocks = _blocks(p)
    text = _text(p, blocks, required=True)
    note = ws.ephemeral(channel, user, text=text or "", blocks=blocks, thread_ts=p.opt("thread_ts"))
    return {"ok": True, "message_ts": note.ts}


def chat_get_permalink(ws: Workspace, p: Params, base: str) -> Answer:
    """A link to a message (flagbot cites evidence by permalink)."""
    channel = p.required("channel", error="channel_not_found")
    ts = p.required("message_ts", error="message_not_found")
    return {"ok": True, "channel": ws.channel(channel).id, "permalink": ws.permalink(base, channel, ts)}


def users_info(ws: Workspace, p: Params, base: str) -> Answer:
    """A member's profile (`is_admin`, `is_bot`, names)."""
    return {"ok": True, "user": ws.user(p.required("user", error="user_not_found")).to_api()}


def conversations_info(ws: Workspace, p: Params, base: str) -> Answer:
    """A channel's name and kind."""
    return {"ok": True, "channel": ws.channel(p.required("channel", error="channel_not_found")).to_api()}


def _page(items: list[Answer], p: Params, default_limit: int) -> tuple[list[Answer], str]:
    limit = max(1, p.number("limit", default_limit))
    cursor = p.opt("cursor")
    start = 0
    if cursor:
        try:
            start = int(base64.b64decode(cursor).decode().removeprefix("offset:"))
        except ValueError:
            raise SlackError("invalid_cursor") from None
    end = start + limit
    next_cursor = base64.b64encode(f"offset:{end}".encode()).decode() if end < len(items) else ""
    return items[start:end], next_cursor


def _in_window(messages: list[Message], p: Params) -> list[Message]:
    oldest, latest = p.opt("oldest"), p.opt("latest")
    inclusive = p.flag("inclusive")

    def keep(m: Message) -> bool:
        ts = float(m.ts)
        if oldest is not None and (ts < float(oldest) or (ts == float(oldest) and not inclusive)):
            return False
        return not (latest is not None and (ts > float(latest) or (ts == float(latest) and not inclusive)))

    return [m for m in messages if keep(m)]


def conversations_history(ws: Workspace, p: Params, base: str) -> Answer:
    """The channel's own messages, newest first; metadata only with include_all_metadata."""
    channel = p.required("channel", error="channel_not_found")
    with_metadata = p.flag("include_all_metadata")
    shown = [
        m.to_api(replies=ws.replies(channel, m.ts), with_metadata=with_metadata)
        for m in reversed(_in_window(ws.roots(channel), p))
    ]
    page, next_cursor = _page(shown, p, 100)
    return {
        "ok": True,
        "messages": page,
        "has_more": bool(next_cursor),
        "pin_count": 0,
        "response_metadata": {"next_cursor": next_cursor},
    }


def conversations_replies(ws: Workspace, p: Params, base: str) -> Answer:
    """A thread: its root then its replies, oldest first."""
    channel = p.required("channel", error="channel_not_found")
    root = ws.thread_root(channel, p.required("ts", error="thread_not_found"))
    replies = ws.replies(channel, root.ts)
    with_metadata = p.flag("include_all_metadata")
    shown = [root.to_api(replies=replies, with_metadata=with_metadata)]
    shown += [m.to_api(with_metadata=with_metadata) for m in _in_window(replies, p)]
    page, next_cursor = _page(shown, p, 1000)
    return {
        "ok": True,
        "messages": page,
        "has_more": bool(next_cursor),
        "response_metadata": {"next_cursor": next_cursor},
    }


def usergroups_users_list(ws: Workspace, p: Params, base: str) -> Answer:
    """The members of a user group (flagbot's RBAC grants roles by group)."""
    group_id = p.required("usergroup", error="no_such_subteam")
    group = ws.usergroups.get(group_id)
    if group is None or (group.disabled and not p.flag("include_disabled")):
        raise SlackError("no_such_subteam")
    return {"ok": True, "users": list(group.users)}


def team_info(ws: Workspace, p: Params, base: str) -> Answer:
    """The workspace (a bot may read its domain to build links)."""
    return {"ok": True, "team": {"id": TEAM_ID, "name": "flagbot stand-in", "domain": TEAM_DOMAIN}}


METHODS: dict[str, Method] = {
    "auth.test": auth_test,
    "chat.postMessage": chat_post_message,
    "chat.update": chat_update,
    "chat.delete": chat_delete,
    "chat.postEphemeral": chat_post_ephemeral,
    "chat.getPermalink": chat_get_permalink,
    "files.getUploadURLExternal": get_upload_url_external,
    "files.completeUploadExternal": complete_upload_external,
    "users.info": users_info,
    "conversations.info": conversations_info,
    "conversations.history": conversations_history,
    "conversations.replies": conversations_replies,
    "usergroups.users.list": usergroups_users_list,
    "team.info": team_info,
}
