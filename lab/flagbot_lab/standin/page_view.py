"""The stand-in's recorded workspace as Slack shows it: a channel's messages, one thread's replies.

Why mimic Slack's layout and not list the records: the page is where a person (and the README's
screenshot) judges whether flagbot's threads read well, so it shows what Slack shows: the
latest version of an edited card marked "(edited)", replies folded under their root with a
count, a broadcast reply in the channel as "replied to a thread", and the current user's
ephemeral messages marked "Only visible to you", where Slack would put them.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from urllib.parse import urlencode, urlsplit

from bot.slack.text import typed_text as unescape_slack
from flagbot_lab.standin.model import Ephemeral, Message, StoredFile
from flagbot_lab.standin.page_blocks import blocks_html
from flagbot_lab.standin.page_mrkdwn import Names, mrkdwn_html
from flagbot_lab.standin.workspace import SlackError, Workspace

AVATAR_COLOURS = ("#4a154b", "#1264a3", "#2eb67d", "#e01e5a", "#ecb22e", "#36c5f0", "#7c3085", "#e8912d")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg")
SUMMARY_CHARS = 80


@dataclass(frozen=True)
class View:
    """What one page shows: a channel, optionally one open thread, as seen by one user."""

    channel: str
    user: str
    thread: str | None = None

    def url(self, **changes: str | None) -> str:
        """This view's page URL, with some fields changed (None drops the thread)."""
        fields = {"channel": self.channel, "user": self.user, "thread": self.thread, **changes}
        return "/?" + urlencode({k: v for k, v in fields.items() if v})


def names_of(ws: Workspace) -> Names:
    """Display names by id, for mentions (`@bob`), channels (`#flagbot-ops`) and user groups."""
    return Names(
        users={u.id: u.name for u in ws.users.values()},
        channels={c.id: c.name for c in ws.channels.values()},
        groups={g.id: g.handle for g in ws.usergroups.values()},
    )


def clock(ts: str) -> str:
    """A message time as Slack shows it in a thread (UTC here: the stand-in has no user time zone)."""
    return datetime.fromtimestamp(float(ts), UTC).strftime("%H:%M")


def _avatar(user_id: str, name: str, *, bot: bool) -> str:
    if bot:
        return '<div class="avatar bot">⚑</div>'
    colour = AVATAR_COLOURS[zlib.crc32(user_id.encode()) % len(AVATAR_COLOURS)]
    return f'<div class="avatar" style="background:{colour}">{escape(name[:1].upper() or "?")}</div>'


def _files(files: list[StoredFile]) -> str:
    out = []
    for f in files:
        title = escape(f.title or f.name)
        if f.name.lower().endswith(IMAGE_SUFFIXES):
            src = escape(urlsplit(f.url_private).path)
            out.append(
                f'<figure class="file-image"><figcaption>{title}</figcaption>'
                f'<img class="file-img" src="{src}" alt="{title}"></figure>'
            )
        else:
            href = escape(urlsplit(f.permalink).path)
            out.append(
                f'<a class="file" href="{href}" target="_blank"><span class="file-icon">📄</span>'
                f"<span><b>{title}</b><br><small>{escape(f.name)} · {f.length} bytes</small></span></a>"
            )
    return "".join(out)


def _summary(message: Message) -> str:
    text = " ".join(unescape_slack(message.text).split())
    return escape(text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…")


def message_html(
    ws: Workspace, message: Message | Ephemeral, view: View, *, in_thread: bool, names: Names
) -> str:
    """One message: who, when, "(edited)", its blocks (or text), files, and the way to its thread."""
    ephemeral = isinstance(message, Ephemeral)
    author = "U0FLAGBOT" if ephemeral else message.user
    person = ws.users.get(author)
    bot = ephemeral or (person is not None and person.is_bot)
    name = person.real_name if person else author
    meta = [f'<span class="who">{escape(name)}</span>']
    if bot:
        meta.append('<span class="app">APP</span>')
    meta.append(f'<time title="{escape(message.ts)}">{clock(message.ts)}</time>')
    body: list[str] = []
    if isinstance(message, Message) and message.edits:
        meta.append(f'<span class="edited" title="edited {len(message.edits)} times">(edited)</span>')
    if isinstance(message, Ephemeral):
        body.append('<div class="eph-note">👁 Only visible to you</div>')
    elif message.reply_broadcast:
        body.append(_broadcast(ws, message, view, in_thread=in_thread))
    if message.blocks:
        body.append(
            f'<div class="blocks">{blocks_html(message.blocks, names, clickable=not ephemeral)}</div>'
        )
    elif message.text:
        body.append(f'<div class="mrkdwn">{mrkdwn_html(message.text, names)}</div>')
    if isinstance(message, Message):
        body.append(_files(message.files))
        if not in_thread and not message.is_reply:
            body.append(_replies(ws, message, view))
    css = "msg" + (" eph" if ephemeral else "") + (" bot" if bot else "")
    channel = escape(message.channel)
    return (
        f'<div class="{css}" data-channel="{channel}" data-ts="{escape(message.ts)}">'
        f"{_avatar(author, name, bot=bot)}"
        f'<div class="content"><div class="meta">{" ".join(meta)}</div>{"".join(body)}</div></div>'
    )


def _broadcast(ws: Workspace, message: Message, view: View, *, in_thread: bool) -> str:
    if in_thread:
        return '<div class="bcast">Also sent to the channel</div>'
    root = _root(ws, message)
    if root is None:
        return ""
    link = escape(view.url(thread=root.ts))
    return f'<div class="bcast">replied to a thread: <a href="{link}">{_summary(root)}</a></div>'


def _root(ws: Workspace, message: Message) -> Message | None:
    try:
        return ws.thread_root(message.channel, message.thread_ts or message.ts)
    except SlackError:
        return None


def _replies(ws: Workspace, root: Message, view: View) -> str:
    replies = ws.replies(root.channel, root.ts)
    if not replies:
        return ""
    count = f"{len(replies)} {'reply' if len(replies) == 1 else 'replies'}"
    link = escape(view.url(thread=root.ts))
    return f'<a class="replies" href="{link}">{count}</a> <span class="last">last reply {clock(replies[-1].ts)}</span>'


def _thread_of(ws: Workspace, note: Ephemeral) -> str | None:
    if note.thread_ts is None:
        return None
    try:
        return ws.thread_root(note.channel, note.thread_ts).ts
    except SlackError:
        return note.thread_ts


def _in_order(items: list[Message | Ephemeral]) -> list[Message | Ephemeral]:
    return sorted(items, key=lambda m: float(m.ts))


def channel_html(ws: Workspace, view: View) -> str:
    """The channel's own messages (roots, plain and broadcast messages) and the user's ephemerals."""
    names = names_of(ws)
    notes = [e for e in ws.ephemerals if e.user == view.user and e.channel == view.channel]
    shown: list[Message | Ephemeral] = [*ws.roots(view.channel)]
    shown += [e for e in notes if _thread_of(ws, e) is None]
    parts = [message_html(ws, m, view, in_thread=False, names=names) for m in _in_order(shown)]
    return (
        "".join(parts) or '<div class="empty">No messages yet: type <code>/flagbot help</code> below.</div>'
    )


def thread_html(ws: Workspace, view: View) -> str | None:
    """The open thread: its root, its replies and the user's ephemerals in it (None: no thread open)."""
    if view.thread is None:
        return None
    names = names_of(ws)
    try:
        root = ws.thread_root(view.channel, view.thread)
    except SlackError:
        return f'<div class="empty">No thread {escape(view.thread)} in this channel.</div>'
    notes = [
        e
        for e in ws.ephemerals
        if e.user == view.user and e.channel == view.channel and _thread_of(ws, e) == root.ts
    ]
    replies: list[Message | Ephemeral] = [*ws.replies(view.channel, root.ts), *notes]
    parts = [message_html(ws, root, view, in_thread=True, names=names)]
    if replies:
        count = sum(1 for r in replies if isinstance(r, Message))
        parts.append(f'<div class="divider-count">{count} {"reply" if count == 1 else "replies"}</div>')
    parts += [message_html(ws, m, view, in_thread=True, names=names) for m in _in_order(replies)]
    return "".join(parts)
