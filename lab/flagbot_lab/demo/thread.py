"""The stand-in's recorded channel read as text: for the headless demo's output and for matching.

A person in Slack sees blocks rendered, mentions as names and `>` rather than `&gt;`; the demo
prints the channel that way, so CI's log of a headless run reads like the thread itself, and
the story's patterns are matched against the same text a reader would check by eye.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from flagbot_lab.standin.blocks import plain_text
from flagbot_lab.standin.model import Ephemeral, Message

_MENTION = re.compile(r"<[@!]([A-Z0-9]+)(?:\|([^>]*))?>")
_LINK = re.compile(r"<(https?://[^|>]+)\|([^>]+)>")


def readable(text: str, names: Mapping[str, str]) -> str:
    """Slack markup as a reader sees it: `<@U0ADMIN>` -> `@alice`, links by label, `&gt;` -> `>`."""
    text = _MENTION.sub(lambda m: "@" + (m.group(2) or names.get(m.group(1), m.group(1))), text)
    text = _LINK.sub(lambda m: f"{m.group(2)} ({m.group(1)})", text)
    return html.unescape(text)


def message_text(message: Message, names: Mapping[str, str]) -> str:
    """What a message shows: its blocks (the fallback text only when it has none), then its files."""
    lines = plain_text(message.blocks) if message.blocks else [message.text]
    lines += [f"[file: {f.title or f.name}]" for f in message.files]
    return readable("\n".join(line for line in lines if line), names)


def note_text(note: Ephemeral, names: Mapping[str, str]) -> str:
    """An ephemeral message's text (its blocks after the text)."""
    return readable("\n".join(line for line in [note.text, *plain_text(note.blocks)] if line), names)


def is_card(message: Message) -> bool:
    """Whether the bot posted this for a run (its metadata names the experiment)."""
    return bool(message.metadata and message.metadata.get("event_type") == "flagbot_experiment")


def ts_key(ts: str) -> tuple[int, int]:
    """A Slack ts as a sortable number pair ("1764450000.000100" -> (1764450000, 100))."""
    seconds, _, micros = ts.partition(".")
    return int(seconds), int(micros or 0)


@dataclass(frozen=True)
class Typed:
    """A command someone typed: slash commands are not channel messages, so the demo records
    them itself, placed after every message that existed when it was sent (`after_ts`)."""

    after_ts: str
    user: str
    text: str


def _indent(text: str, prefix: str) -> list[str]:
    return [prefix + line if line else prefix.rstrip() for line in text.splitlines()]


def _message_block(message: Message, names: Mapping[str, str], *, reply: bool) -> list[str]:
    who = names.get(message.user, message.user)
    edited = f" (edited {len(message.edits)}x)" if message.edits else ""
    broadcast = " (also sent to the channel)" if message.reply_broadcast else ""
    if reply:
        return [f"    ↳ {who}{edited}{broadcast}", *_indent(message_text(message, names), "      │ ")]
    return [f"● {who}{edited}", *_indent(message_text(message, names), "  │ ")]


def transcript(
    roots: Sequence[Message],
    replies: Mapping[str, Sequence[Message]],
    notes: Iterable[Ephemeral],
    typed: Iterable[Typed],
    names: Mapping[str, str],
    *,
    title: str,
) -> str:
    """The channel as text: each root then its replies (as Slack shows a thread), the commands
    typed and the ephemeral answers interleaved where they happened."""
    events: list[tuple[tuple[int, int], int, list[str]]] = []
    for root in roots:
        if root.is_reply:  # a broadcast reply: shown in its thread
            continue
        lines = _message_block(root, names, reply=False)
        for reply in replies.get(root.ts, ()):
            lines += _message_block(reply, names, reply=True)
        events.append((ts_key(root.ts), 0, lines))
    for note in notes:
        who = names.get(note.user, note.user)
        events.append((ts_key(note.ts), 1, _indent(note_text(note, names), f"  (only {who} sees) ")))
    for command in typed:
        who = names.get(command.user, command.user)
        events.append((ts_key(command.after_ts), 2, ["", f"» {who} typed: /flagbot {command.text}"]))
    events.sort(key=lambda event: (event[0], event[1]))  # a command after what it followed
    out = [title, "=" * len(title)]
    for _, _, lines in events:
        out += lines
    return "\n".join(out) + "\n"
