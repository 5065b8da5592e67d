"""The workspace's state and the operations the Web API and the bot-facing side share.

One object owns every message, so a slash command's response_url reply, a chat.postMessage
and a user's @-mention all land in the same ordered channel history a test reads back.
"""

from __future__ import annotations

import itertools
from typing import Any

from flagbot_lab.standin.model import (
    BOT_ID,
    BOT_USER_ID,
    TEAM_ID,
    Channel,
    Clock,
    Ephemeral,
    Message,
    StoredFile,
    User,
    Usergroup,
    seeded_channels,
    seeded_usergroups,
    seeded_users,
)


class SlackError(Exception):
    """A Web API error: answered as `{"ok": false, "error": code}` (HTTP 200, like Slack)."""

    def __init__(self, code: str, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.extra = extra


class Workspace:
    """Users, user groups, channels with their messages, ephemeral messages and files."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.users: dict[str, User] = {u.id: u for u in seeded_users()}
        self.channels: dict[str, Channel] = {c.id: c for c in seeded_channels()}
        self.usergroups: dict[str, Usergroup] = {g.id: g for g in seeded_usergroups()}
        self._messages: dict[str, list[Message]] = {c: [] for c in self.channels}
        self.ephemerals: list[Ephemeral] = []
        self.files: dict[str, StoredFile] = {}
        self._file_ids = itertools.count(1)

    # ---- seeding

    def add_user(self, user: User) -> User:
        """Add (or replace) a member, e.g. a non-admin stranger for an RBAC refusal."""
        self.users[user.id] = user
        return user

    def add_channel(self, channel: Channel) -> Channel:
        """Add a conversation; the bot is taken to be a member."""
        self.channels[channel.id] = channel
        self._messages.setdefault(channel.id, [])
        return channel

    def add_usergroup(self, group: Usergroup) -> Usergroup:
        """Add (or replace) a user group."""
        self.usergroups[group.id] = group
        return group

    # ---- lookups

    def channel(self, ref: str) -> Channel:
        """A channel by id, `#name` or name (chat.postMessage accepts all three)."""
        if ref in self.channels:
            return self.channels[ref]
        name = ref.removeprefix("#")
        for channel in self.channels.values():
            if channel.name == name:
                return channel
        raise SlackError("channel_not_found")

    def user(self, user_id: str) -> User:
        """A member by id."""
        if user_id not in self.users:
            raise SlackError("user_not_found")
        return self.users[user_id]

    def all_messages(self, channel: str) -> list[Message]:
        """Every live message of a channel (roots and replies), oldest first."""
        return [m for m in self._messages[self.channel(channel).id] if not m.deleted]

    def message(self, channel: str, ts: str) -> Message:
        """One live message by channel and ts."""
        for m in self.all_messages(channel):
            if m.ts == ts:
                return m
        raise SlackError("message_not_found")

    def replies(self, channel: str, root_ts: str) -> list[Message]:
        """The replies of a thread (not its root), oldest first."""
        return [m for m in self.all_messages(channel) if m.thread_ts == root_ts and m.ts != root_ts]

    def roots(self, channel: str) -> list[Message]:
        """What the channel itself shows: thread roots, plain messages and broadcast replies."""
        return [m for m in self.all_messages(channel) if not m.is_reply or m.reply_broadcast]

    def thread_root(self, channel: str, thread_ts: str) -> Message:
        """The root of the thread `thread_ts` names; a reply's ts resolves to its thread's root."""
        try:
            found = self.message(channel, thread_ts)
        except SlackError:
            raise SlackError("thread_not_found") from None
        if found.is_reply and found.thread_ts is not None:
            return self.message(channel, found.thread_ts)
        return found

    # ---- changes

    def post(
        self,
        channel: str,
        *,
        user: str = BOT_USER_ID,
        text: str = "",
        blocks: list[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        metadata: dict[str, Any] | None = None,
        reply_broadcast: bool = False,
        files: list[StoredFile] | None = None,
    ) -> Message:
        """Append a message; a reply is attached to its thread's root (Slack resolves a reply's ts)."""
        chan = self.channel(channel)
        root_ts = self.thread_root(chan.id, thread_ts).ts if thread_ts else None
        message = Message(
            channel=chan.id,
            ts=self.clock.next(),
            user=user,
            text=text,
            blocks=list(blocks or []),
            thread_ts=root_ts,
            metadata=metadata,
            bot_id=BOT_ID if user == BOT_USER_ID else None,
            files=list(files or []),
            reply_broadcast=reply_broadcast and root_ts is not None,
        )
        if root_ts is not None:
            self.message(chan.id, root_ts).thread_ts = root_ts
        self._messages[chan.id].append(message)
        return message

    def update(
        self,
        channel: str,
        ts: str,
        *,
        text: str | None,
        blocks: list[dict[str, Any]] | None,
        metadata: dict[str, Any] | None,
        user: str = BOT_USER_ID,
    ) -> Message:
        """Edit a message, keeping the earlier version in its history (chat.update)."""
        message = self.message(channel, ts)
        if message.user != user:
            raise SlackError("cant_update_message")
        message.edit(
            text=message.text if text is None else text,
            blocks=message.blocks if blocks is None else blocks,
            metadata=message.metadata if metadata is None else metadata,
            ts=self.clock.next(),
        )
        return message

    def delete(self, channel: str, ts: str) -> Message:
        """Remove a message from what the channel shows (chat.delete, delete_original)."""
        message = self.message(channel, ts)
        message.deleted = True
        return message

    def ephemeral(
        self,
        channel: str,
        user: str,
        *,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
    ) -> Ephemeral:
        """A message only `user` sees; it is never part of the channel's history."""
        chan = self.channel(channel)
        self.user(user)
        note = Ephemeral(chan.id, user, self.clock.next(), text, list(blocks or []), thread_ts)
        self.ephemerals.append(note)
        return note

    def new_file(self, name: str, length: int, base_url: str) -> StoredFile:
        """Step 1 of an upload: a file id and where its bytes go."""
        file_id = f"F0{next(self._file_ids):08d}"
        stored = StoredFile(
            id=file_id,
            name=name,
            length=length,
            permalink=f"{base_url}/files/{BOT_USER_ID}/{file_id}/{name}",
            url_private=f"{base_url}/files-pri/{TEAM_ID}-{file_id}/{name}",
        )
        self.files[file_id] = stored
        return stored

    def permalink(self, base_url: str, channel: str, ts: str) -> str:
        """A message's permalink in Slack's shape (`/archives/C…/p<ts without dot>`)."""
        message = self.message(channel, ts)
        link = f"{base_url}/archives/{message.channel}/p{ts.replace('.', '')}"
        if message.is_reply:
            link += f"?thread_ts={message.thread_ts}&cid={message.channel}"
        return link
