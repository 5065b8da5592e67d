"""Slack's limits and the text laid out under them: escaping, cutting, monospace tables.

Why one module: Slack rejects a whole message when one text is a character too long (a
3,001-character section fails `chat.postMessage` with `invalid_blocks`), and evidence is
unbounded (a journal line can be 14 KB, a table hundreds of rows). Every text the renderer
emits goes through these helpers, which count the *escaped* length (`&` becomes `&amp;`, five
characters), cut on line boundaries where they can, and say visibly when they cut.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bot.loop.table_layout import display_width, stacked_records

MAX_SECTION = 3000
"""Characters of one section's text (also the limit of any text object)."""
MAX_BLOCKS = 50
"""Blocks of one message."""
MAX_HEADER = 150
"""Characters of a header block's plain_text."""
MAX_BUTTON_TEXT = 75
"""Characters of a button's label."""
MAX_BLOCK_ID = 255
"""Characters of a block_id."""
MAX_CONTEXT_ELEMENTS = 10
"""Elements of one context block."""
MAX_FALLBACK_TEXT = 40_000
"""Characters of a message's top-level `text` (Slack truncates beyond it)."""
SUMMARY_CHARS = 300
"""A fallback text is a notification line, not the evidence: this short."""
MAX_CELL = 80
"""Display columns of one table cell (longer cells are cut with `…`)."""
TITLE_CHARS = 200
"""Escaped characters of a bold title line."""
CODE_FENCE = "```"
CODE_OVERHEAD = len(CODE_FENCE + "\n" + "\n" + CODE_FENCE)
LINE_BUDGET = 900
"""Escaped characters of one table line (or stacked record): a title, the header, its rule and one
row always fit."""
TABLE_WIDTH = 60
"""Display columns of one table line in Slack: what a phone shows of a code block without
wrapping it. A wider table is sent as stacked records (`bot.loop.table_layout`)."""

BlockDict = dict[str, Any]
EMPTY = "_(empty)_"
"""What an empty text shows: Slack refuses an empty text object."""

_ENTITY_TAIL = re.compile(r"&[a-z]{0,3}$")
_NUMBER = re.compile(r"^[+\-−±~≈]?\d[\d,_]*(\.\d+)?([eE][+-]?\d+)?\s?(%|[A-Za-zµ/]{1,6})?$|^[+\-−]?\.\d+$")
_NOT_A_VALUE = frozenset({"", "-", "—", "–", "n/a", "N/A", "?", "none", "None"})


def escape(text: str) -> str:
    """Slack's mrkdwn escaping: only `&`, `<` and `>` (they start entities, links and mentions)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def safe_cut(text: str, limit: int, marker: str = "…") -> str:
    """Already-formatted text cut to `limit` characters without leaving half an entity."""
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - len(marker))]
    cut = _ENTITY_TAIL.sub("", cut)
    return cut + marker


def clip_escaped(raw: str, limit: int, marker: str = "…") -> str:
    """`raw` escaped and, when too long, cut so that the escaped text plus `marker` fits `limit`."""
    escaped = escape(raw)
    if len(escaped) <= limit:
        return escaped
    return safe_cut(escaped, limit, marker)


def cut_escaped(raw: str, budget: int) -> list[str]:
    """One long line as escaped pieces of at most `budget` characters each (no entity split).

    Most lines fit whole: they are escaped in one call, and only a line that does not fit is
    walked character by character (an ack's help text has hundreds of lines)."""
    whole = escape(raw)
    if len(whole) <= budget:
        return [whole]
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for char in raw:
        piece = escape(char)
        if size + len(piece) > budget and current:
            pieces.append("".join(current))
            current, size = [], 0
        current.append(piece)
        size += len(piece)
    if current or not pieces:
        pieces.append("".join(current))
    return pieces


def pack(lines: Sequence[str], budget: int) -> list[list[str]]:
    """Consecutive lines (each at most `budget`) grouped so each group joined by newlines fits."""
    groups: list[list[str]] = []
    current: list[str] = []
    size = -1
    for line in lines:
        if current and size + 1 + len(line) > budget:
            groups.append(current)
            current, size = [], -1
        current.append(line)
        size += 1 + len(line)
    if current:
        groups.append(current)
    return groups


def text_chunks(raw: str, budget: int) -> list[str]:
    """Free text escaped and cut into chunks of at most `budget`, on line boundaries where possible."""
    lines: list[str] = []
    for line in raw.split("\n"):
        lines.extend(cut_escaped(line, budget))
    return ["\n".join(group) for group in pack(lines, budget)]


def fence_safe(line: str) -> str:
    """A line that cannot close a code block early: a zero-width space after every backtick that
    another follows (replacing only each ``` would leave one in ```` ````, where two meet)."""
    return re.sub(r"`(?=`)", "`\u200b", line)


def code_block(lines: Sequence[str]) -> str:
    """Escaped lines in a code block (`lines` are already escaped and fence-safe)."""
    return f"{CODE_FENCE}\n" + "\n".join(lines) + f"\n{CODE_FENCE}"


def bold_title(title: str) -> str:
    """A title as a bold line (empty when there is no title)."""
    title = " ".join(title.split())
    return f"*{clip_escaped(title, TITLE_CHARS)}*" if title else ""


def section(text: str) -> BlockDict:
    """A mrkdwn section; the final guard on the limit (callers already keep within it)."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": safe_cut(text or EMPTY, MAX_SECTION)}}


def context(*texts: str) -> BlockDict:
    """A context block of mrkdwn elements (at most 10, each within the text limit)."""
    elements = [
        {"type": "mrkdwn", "text": safe_cut(text or EMPTY, MAX_SECTION)}
        for text in texts[:MAX_CONTEXT_ELEMENTS]
    ]
    return {"type": "context", "elements": elements}


def plain(text: str, limit: int) -> BlockDict:
    """A plain_text object (no escaping: Slack shows plain text literally) within `limit`."""
    flat = " ".join(text.split()) or "…"
    return {"type": "plain_text", "text": safe_cut(flat, limit), "emoji": True}


def summary(text: str) -> str:
    """A fallback text: one short escaped line (notifications and screen readers)."""
    return clip_escaped(" ".join(text.split()), SUMMARY_CHARS) or "flagbot"


def _clip_cell(cell: str) -> str:
    cell = " ".join(cell.replace("\t", " ").split("\n")).replace("\r", " ")
    if display_width(cell) <= MAX_CELL:
        return cell
    out: list[str] = []
    width = 0
    for char in cell:
        width += display_width(char)
        if width > MAX_CELL - 1:
            break
        out.append(char)
    return "".join(out) + "…"


def is_numeric(cell: str) -> bool:
    """A cell that reads as a number (`48`, `-45.8 %`, `41 s`, `1,234`): right-aligned."""
    return bool(_NUMBER.match(cell.strip()))


def _pad(cell: str, width: int, right: bool) -> str:
    fill = " " * max(0, width - display_width(cell))
    return fill + cell if right else cell + fill


def table_lines(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Sequence[bool] | None = None,
    width: int = TABLE_WIDTH,
) -> tuple[list[str], list[str]]:
    """(header lines, row lines) of a monospace table, raw (not escaped).

    Columns whose every value is numeric are right-aligned unless `right` says otherwise; a
    short row is padded with empty cells and a long one keeps its extra cells under no header.
    A table with a line wider than `width` is no table on a phone: it comes back as no header
    and one stacked record per row (each a text of several lines, none wider than `width`).
    """
    count = max([len(columns), *(len(row) for row in rows)])
    header = [_clip_cell(c) for c in columns] + [""] * (count - len(columns))
    body = [[_clip_cell(c) for c in row] + [""] * (count - len(row)) for row in rows]
    if right is None:
        right = [
            any(row[i] not in _NOT_A_VALUE for row in body)
            and all(row[i] in _NOT_A_VALUE or is_numeric(row[i]) for row in body)
            for i in range(count)
        ]
    aligns = list(right) + [False] * (count - len(right))
    widths = [max([display_width(header[i]), *(display_width(row[i]) for row in body)]) for i in range(count)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(_pad(cell, widths[i], aligns[i]) for i, cell in enumerate(cells)).rstrip()

    rule = "  ".join("-" * max(1, column_width) for column_width in widths)
    lines = [line(row) for row in body]
    if max(display_width(text) for text in [rule, *lines]) > width:
        return [], ["\n".join(record) for record in stacked_records(columns, rows, width)]
    return [line(header), rule], lines


def table_sections(title: str, header: Sequence[str], rows: Sequence[str]) -> list[str]:
    """Section texts of a laid-out table: the bold title, then a code block with the header
    repeated in every section, rows split across sections when they do not fit one."""
    first = bold_title(title)
    later = f"{first} _(continued)_" if first else "_(continued)_"

    def prepare(line: str) -> str:
        return clip_escaped(fence_safe(line), LINE_BUDGET)

    head = [prepare(line) for line in header]
    body = [prepare(line) for line in rows] or ["(no rows)"]
    fixed = len(later) + 1 + CODE_OVERHEAD + sum(len(line) + 1 for line in head)
    texts: list[str] = []
    for index, group in enumerate(pack(body, MAX_SECTION - fixed)):
        lead = first if index == 0 else later
        block = code_block([*head, *group])
        texts.append(f"{lead}\n{block}" if lead else block)
    return texts
