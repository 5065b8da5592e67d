"""Slack's mrkdwn as HTML, for the stand-in's page: bold, italic, code, links, mentions, emoji.

Why not show the raw text: the page is where a person judges whether the bot's messages read
well in Slack, so a `*Verdict:*` must look bold, a table in a ``` block must keep its columns,
and `<@U0OPER>` must read as `@bob`. Slack-escaped entities (`&amp;`, `&lt;`, `&gt;`) are read
back, and everything is HTML-escaped again, so a message can never inject markup into the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape

from bot.slack.text import typed_text as unescape_slack

FENCE = re.compile(r"```(.*?)```", re.DOTALL)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
TOKEN = re.compile(r"<([^<>\n]+)>")
SLOT = re.compile("\ue000(\\d+)\ue001")
AROUND_SLOT = re.compile("\n?(\ue000(\\d+)\ue001)\n?")
"""A placeholder with the newlines around it: dropped around a code block, a box of its own."""
BOLD = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
ITALIC = re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])")
STRIKE = re.compile(r"(?<![\w~])~(?=\S)([^~\n]+?)(?<=\S)~(?![\w~])")
EMOJI_CODE = re.compile(r":([a-z0-9_+-]+):")
QUOTE = re.compile(r"^(?:&gt;|>) ?(.*)$", re.MULTILINE)
SAFE_URL = re.compile(r"^(https?://|mailto:|/(?!/))", re.IGNORECASE)

EMOJI = {
    "warning": "⚠️",
    "white_check_mark": "✅",
    "heavy_check_mark": "✔️",
    "x": "❌",
    "no_entry": "⛔",
    "no_entry_sign": "🚫",
    "rotating_light": "🚨",
    "chart_with_upwards_trend": "📈",
    "chart_with_downwards_trend": "📉",
    "hourglass": "⌛",
    "hourglass_flowing_sand": "⏳",
    "eyes": "👀",
    "tada": "🎉",
    "+1": "👍",
    "thumbsup": "👍",
    "thumbsdown": "👎",
    "information_source": "ℹ️",
    "mag": "🔍",
    "red_circle": "🔴",
    "large_green_circle": "🟢",
    "arrow_right": "➡️",
    "leftwards_arrow_with_hook": "↩️",
    "lock": "🔒",
    "raised_hand": "✋",
    "question": "❓",
    "memo": "📝",
    "triangular_flag_on_post": "🚩",
}


@dataclass(frozen=True)
class Names:
    """Who and what ids stand for: `<@U…>` shows as `@name`, `<#C…>` as `#name`."""

    users: dict[str, str] = field(default_factory=dict)
    channels: dict[str, str] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)


def emoji(text: str) -> str:
    """`:warning:` as ⚠️ for the shortcodes flagbot uses; unknown ones stay as typed."""
    return EMOJI_CODE.sub(lambda m: EMOJI.get(m.group(1), m.group(0)), text)


def plain_html(text: str, *, with_emoji: bool = True) -> str:
    """A plain_text object's text: shown literally (HTML-escaped), shortcodes as emoji."""
    shown = escape(text)
    return emoji(shown) if with_emoji else shown


def _link(url: str, label: str) -> str:
    raw = unescape_slack(url)
    if not SAFE_URL.match(raw):
        return escape(unescape_slack(label or url))
    return (
        f'<a href="{escape(raw)}" target="_blank" rel="noopener">{escape(unescape_slack(label or url))}</a>'
    )


def _token(inner: str, names: Names) -> str:
    """One `<…>` control sequence: a mention, a channel, a special mention or a link."""
    target, _, label = inner.partition("|")
    if target.startswith("@"):
        name = label or names.users.get(target[1:], target[1:])
        return f'<span class="mention">@{escape(name)}</span>'
    if target.startswith("#"):
        name = label or names.channels.get(target[1:], target[1:])
        return f'<span class="mention">#{escape(name)}</span>'
    if target.startswith("!subteam^"):
        group = target.removeprefix("!subteam^")
        return f'<span class="mention">@{escape(label.lstrip("@") or names.groups.get(group, group))}</span>'
    if target.startswith("!"):
        return f'<span class="mention">@{escape(label or target[1:])}</span>'
    return _link(target, label)


def _format(text: str) -> str:
    """Bold, italic, strike and emoji on HTML-escaped text (placeholders pass through)."""
    text = BOLD.sub(r"<b>\1</b>", text)
    text = ITALIC.sub(r"<i>\1</i>", text)
    text = STRIKE.sub(r"<s>\1</s>", text)
    return emoji(text)


def mrkdwn_html(text: str, names: Names | None = None) -> str:
    """A mrkdwn text as HTML (to be shown with `white-space: pre-wrap`)."""
    names = names or Names()
    slots: list[str] = []

    def keep(html: str) -> str:
        slots.append(html)
        return f"\ue000{len(slots) - 1}\ue001"

    def fenced(match: re.Match[str]) -> str:
        body = match.group(1).removeprefix("\n").removesuffix("\n")
        return keep(f'<pre class="code">{escape(unescape_slack(body))}</pre>')

    text = FENCE.sub(fenced, text.replace("\ue000", "").replace("\ue001", ""))
    text = INLINE_CODE.sub(lambda m: keep(f"<code>{escape(unescape_slack(m.group(1)))}</code>"), text)
    text = TOKEN.sub(lambda m: keep(_token(m.group(1), names)), text)
    html = _format(escape(unescape_slack(text)))
    html = QUOTE.sub(r'<span class="quote">\1</span>', html)
    html = AROUND_SLOT.sub(
        lambda m: m.group(1) if slots[int(m.group(2))].startswith("<pre") else m.group(0), html
    )
    return SLOT.sub(lambda m: slots[int(m.group(1))], html)
