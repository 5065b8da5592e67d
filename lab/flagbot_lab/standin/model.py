"""The stand-in's workspace: users, groups, channels, messages, files, as plain data.

Tests assert on this model rather than on the HTTP calls the bot made, because what matters
is what a person in the channel would see (which thread a reply landed in, how a card was
edited), and several call sequences can produce the same, correct, result.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

TEAM_ID = "T0STANDIN"
TEAM_DOMAIN = "standin"
APP_ID = "A0FLAGBOT"
BOT_USER_ID = "U0FLAGBOT"
BOT_ID = "B0FLAGBOT"
FIRST_TS_SECONDS = 1764450000
TS_STEP_US = 100


@dataclass
class User:
    """A workspace member; flagbot's RBAC reads ids and groups, never these names."""

    id: str
    name: str
    real_name: str
    is_admin: bool = False
    is_owner: bool = False
    is_bot: bool = False
    deleted: bool = False
    tz: str = "Europe/Paris"

    def to_api(self) -> dict[str, Any]:
        """The `user` object of users.info, with the fields Slack clients usually read."""
        return {
            "id": self.id,
            "team_id": TEAM_ID,
            "name": self.name,
            "real_name": self.real_name,
            "deleted": self.deleted,
            "is_admin": self.is_admin,
            "is_owner": self.is_owner,
            "is_primary_owner": False,
            "is_restricted": False,
            "is_ultra_restricted": False,
            "is_bot": self.is_bot,
            "is_app_user": False,
            "tz": self.tz,
            "profile": {
                "real_name": self.real_name,
                "display_name": self.name,
                "email": f"{self.name}@{TEAM_DOMAIN}.example",
                "team": TEAM_ID,
            },
        }


@dataclass
class Channel:
    """A conversation the bot is a member of (the stand-in does not model joining)."""

    id: str
    name: str
    is_private: bool = False
    is_im: bool = False
    topic: str = ""

    def to_api(self) -> dict[str, Any]:
        """The `channel` object of conversations.info."""
        return {
            "id": self.id,
            "name": self.name,
            "is_channel": not self.is_private and not self.is_im,
            "is_group": self.is_private,
            "is_im": self.is_im,
            "is_private": self.is_private,
            "is_archived": False,
            "is_member": True,
            "created": FIRST_TS_SECONDS - 86400,
            "context_team_id": TEAM_ID,
            "topic": {"value": self.topic, "creator": "", "last_set": 0},
            "purpose": {"value": "", "creator": "", "last_set": 0},
        }


@dataclass
class Usergroup:
    """A user group (`S…` id) as flagbot's RBAC configures roles by."""

    id: str
    handle: str
    users: list[str]
    disabled: bool = False


@dataclass
class StoredFile:
    """A file from the three-step upload; `content` is what was POSTed to the upload URL."""

    id: str
    name: str
    length: int
    permalink: str
    url_private: str
    title: str = ""
    content: bytes | None = None
    channel: str | None = None
    thread_ts: str | None = None

    @property
    def uploaded(self) -> bool:
        """Whether step 2 (the POST of the bytes) happened."""
        return self.content is not None

    @property
    def text(self) -> str:
        """The content as text, for asserting on uploaded journal excerpts."""
        return (self.content or b"").decode("utf-8", "replace")

    def to_api(self) -> dict[str, Any]:
        """The file object of files.completeUploadExternal (the fields slack_sdk and bots read)."""
        shares: dict[str, Any] = {}
        if self.channel is not None:
            share: dict[str, Any] = {"ts": "", "channel_name": ""}
            if self.thread_ts:
                share["thread_ts"] = self.thread_ts
            shares = {"public": {self.channel: [share]}}
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title or self.name,
            "mimetype": _mimetype(self.name),
            "filetype": self.name.rsplit(".", 1)[-1] if "." in self.name else "text",
            "size": self.length,
            "user": BOT_USER_ID,
            "url_private": self.url_private,
            "permalink": self.permalink,
            "channels": [self.channel] if self.channel else [],
            "shares": shares,
        }


def _mimetype(name: str) -> str:
    if name.endswith(".png"):
        return "image/png"
    if name.endswith(".json"):
        return "application/json"
    return "text/plain"


@dataclass(frozen=True)
class Revision:
    """One earlier version of an edited message (what it said before a chat.update)."""

    text: str
    blocks: list[dict[str, Any]]
    metadata: dict[str, Any] | None


@dataclass
class Message:
    """A message in a channel; `edits` holds its earlier versions, oldest first."""

    channel: str
    ts: str
    user: str
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    thread_ts: str | None = None
    metadata: dict[str, Any] | None = None
    bot_id: str | None = None
    files: list[StoredFile] = field(default_factory=list)
    edits: list[Revision] = field(default_factory=list)
    reply_broadcast: bool = False
    edited_ts: str | None = None
    deleted: bool = False

    @property
    def is_reply(self) -> bool:
        """Whether the message is in a thread and not its root."""
        return self.thread_ts is not None and self.thread_ts != self.ts

    @property
    def history(self) -> list[Revision]:
        """Every version, oldest first, ending with the current one."""
        return [*self.edits, Revision(self.text, copy.deepcopy(self.blocks), copy.deepcopy(self.metadata))]

    def edit(
        self, *, text: str, blocks: list[dict[str, Any]], metadata: dict[str, Any] | None, ts: str
    ) -> None:
        """Record the current version in `edits`, then replace it (chat.update)."""
        self.edits.append(Revision(self.text, self.blocks, self.metadata))
        self.text, self.blocks, self.metadata, self.edited_ts = text, blocks, metadata, ts

    def to_api(self, *, replies: list[Message] | None = None, with_metadata: bool = True) -> dict[str, Any]:
        """The message object as Slack returns it (history, replies, postMessage's `message`)."""
        out: dict[str, Any] = {"type": "message", "ts": self.ts, "user": self.user, "text": self.text}
        out["team"] = TEAM_ID
        if self.blocks:
            out["blocks"] = copy.deepcopy(self.blocks)
        if self.bot_id:
            out["bot_id"] = self.bot_id
            out["app_id"] = APP_ID
        if self.thread_ts:
            out["thread_ts"] = self.thread_ts
        if self.is_reply:
            out["parent_user_id"] = ""
        if self.reply_broadcast:
            out["subtype"] = "thread_broadcast"
        if self.files:
            out["files"] = [f.to_api() for f in self.files]
            out["upload"] = False
        if self.edited_ts:
            out["edited"] = {"user": self.user, "ts": self.edited_ts}
        if with_metadata and self.metadata is not None:
            out["metadata"] = copy.deepcopy(self.metadata)
        if replies:
            out["thread_ts"] = self.ts
            out["reply_count"] = len(replies)
            out["reply_users"] = sorted({r.user for r in replies})
            out["reply_users_count"] = len(out["reply_users"])
            out["latest_reply"] = replies[-1].ts
        return out


@dataclass(frozen=True)
class Ephemeral:
    """A message only `user` saw (chat.postEphemeral or an ephemeral response_url reply)."""

    channel: str
    user: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None


class Clock:
    """Message timestamps: unique, increasing, and the same in every run (readable in tests)."""

    def __init__(self, first_seconds: int = FIRST_TS_SECONDS) -> None:
        self._us = first_seconds * 1_000_000

    def next(self) -> str:
        """The next `ts`, e.g. "1764450000.000100"."""
        self._us += TS_STEP_US
        return f"{self._us // 1_000_000}.{self._us % 1_000_000:06d}"


def seeded_users() -> list[User]:
    """Enough people for the RBAC cases: an admin, an operator, an approver, a viewer, the bot."""
    return [
        User("U0ADMIN", "alice", "Alice Admin", is_admin=True, is_owner=True),
        User("U0OPER", "bob", "Bob Operator"),
        User("U0APPR", "dana", "Dana Approver"),
        User("U0VIEW", "carol", "Carol Viewer"),
        User(BOT_USER_ID, "flagbot", "flagbot", is_bot=True),
    ]


def seeded_channels() -> list[Channel]:
    """The ops channel flagbot works in, a general channel, and a private one."""
    return [
        Channel("C0FLAGBOT", "flagbot-ops", topic="flag tuning"),
        Channel("C0GENERAL", "general"),
        Channel("G0PRIVATE", "gpu-admins", is_private=True),
    ]


def seeded_usergroups() -> list[Usergroup]:
    """User groups to configure roles by (`S…` ids)."""
    return [
        Usergroup("S0OPERATORS", "flagbot-operators", ["U0OPER", "U0ADMIN"]),
        Usergroup("S0APPROVERS", "flagbot-approvers", ["U0APPR"]),
    ]
