"""Evidence blocks as Block Kit: the one Slack renderer, and the one place Slack's limits live.

Why one renderer per sink (as the console has `bot.loop.console`): a finding is typed data
(`bot.target.evidence`), and only here does it become sections, code blocks, context lines,
file uploads and images. Whatever the evidence holds (a 14 KB journal line, a thousand-row
table, `<` in a grep pattern), every text this module returns is escaped and within Slack's
limits, a journal excerpt keeps the exact command that printed it, and what did not fit inline
is uploaded as a file rather than dropped. The status card and its buttons are in
`bot.slack.card`, the limits and the text layout in `bot.slack.render_tables`; both are
re-exported here, the contract's one import path (docs/slack.md, "Renderer contract").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from bot.slack.card import (
    ACTION_IDS,
    ACTIONS,
    MAX_ACTION_VALUE,
    ActionValue,
    CardState,
    action_value,
    approval_buttons,
    hypothesis_button,
    parse_action_value,
    status_card,
    verdict_buttons,
    verdict_emoji,
)
from bot.slack.render_tables import (
    CODE_OVERHEAD,
    MAX_BLOCK_ID,
    MAX_BLOCKS,
    MAX_BUTTON_TEXT,
    MAX_CONTEXT_ELEMENTS,
    MAX_FALLBACK_TEXT,
    MAX_HEADER,
    MAX_SECTION,
    BlockDict,
    bold_title,
    clip_escaped,
    code_block,
    context,
    cut_escaped,
    escape,
    fence_safe,
    pack,
    safe_cut,
    section,
    summary,
    table_lines,
    table_sections,
    text_chunks,
)
from bot.target.evidence import (
    ChartBlock,
    Evidence,
    JournalExcerpt,
    MetricComparison,
    TableBlock,
    TextBlock,
    VerdictBlock,
)

__all__ = [
    "ACTIONS",
    "ACTION_IDS",
    "INLINE_EXCERPT_LINES",
    "MAX_ACTION_VALUE",
    "MAX_BLOCKS",
    "MAX_BLOCK_ID",
    "MAX_BUTTON_TEXT",
    "MAX_CONTEXT_ELEMENTS",
    "MAX_FALLBACK_TEXT",
    "MAX_HEADER",
    "MAX_SECTION",
    "ActionValue",
    "BlockDict",
    "CardState",
    "FileUpload",
    "Rendered",
    "action_value",
    "approval_buttons",
    "escape",
    "hypothesis_button",
    "messages",
    "parse_action_value",
    "render_block",
    "status_card",
    "verdict_buttons",
]

INLINE_EXCERPT_LINES = 20
"""A journal excerpt longer than this is uploaded as a file (its first lines stay inline)."""
PREVIEW_HEAD = 10
"""Lines of a long excerpt shown inline from its start (the highlighted line is added after)."""
HIGHLIGHT_MARK = ">> "
PLAIN_MARK = "   "
ATTACHED = "_(full excerpt attached)_"
GOOD = frozenset({"improved", "pass", "found", "ok", "succeeded", "better"})
BAD = frozenset({"regressed", "fail", "failed", "failed-to-start", "worse"})
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_LINE_CAPS = ((500, 1000), (200, 600), (120, 400), (80, 200), (40, 120), (40, 40))
"""(other line, highlighted line) escaped widths tried in turn until an inline preview fits."""


@dataclass(frozen=True)
class FileUpload:
    """What a reporter uploads with files_upload_v2 (then links the permalink)."""

    filename: str
    content: str
    title: str
    initial_comment: str


@dataclass(frozen=True)
class Rendered:
    """One evidence block for Slack: blocks within limits, a short fallback, uploads."""

    blocks: list[BlockDict]
    text: str
    files: list[FileUpload] = field(default_factory=list)
    images: list[Path] = field(default_factory=list)


def render_block(block: Evidence) -> Rendered:
    """One evidence block (any of the six kinds) as Block Kit."""
    if isinstance(block, TextBlock):
        return _text(block)
    if isinstance(block, TableBlock):
        header, rows = table_lines(block.columns, block.rows)
        return _table(block.title, header, rows, block.note)
    if isinstance(block, MetricComparison):
        return _comparison(block)
    if isinstance(block, JournalExcerpt):
        return _journal(block)
    if isinstance(block, ChartBlock):
        return _chart(block)
    if isinstance(block, VerdictBlock):
        return _verdict(block)
    raise TypeError(f"not an evidence block: {type(block).__name__}")


def messages(blocks: list[BlockDict], text: str) -> list[tuple[list[BlockDict], str]]:
    """Blocks split into messages of at most MAX_BLOCKS, each with a fallback text.

    No blocks gives one text-only message (none when the text is empty too); a split message's
    parts say `(2/3)` so a notification shows there is more.
    """
    text = safe_cut(text, MAX_FALLBACK_TEXT)
    if not blocks:
        return [([], text)] if text else []
    parts = [blocks[start : start + MAX_BLOCKS] for start in range(0, len(blocks), MAX_BLOCKS)]
    if len(parts) == 1:
        return [(parts[0], text)]
    total = len(parts)
    base = safe_cut(text, MAX_FALLBACK_TEXT - 20)
    return [(part, f"{base} ({n}/{total})") for n, part in enumerate(parts, start=1)]


def _text(block: TextBlock) -> Rendered:
    title = bold_title(block.title)
    budget = MAX_SECTION - len(title) - 1
    chunks = text_chunks(block.text, budget) if block.text else []
    if title:
        chunks = [f"{title}\n{chunks[0]}" if chunks else title, *chunks[1:]]
    blocks = [section(chunk) for chunk in chunks] or [section("")]
    first_line = block.text.strip().split("\n", 1)[0] if block.text.strip() else ""
    return Rendered(blocks, summary(block.title or first_line or "flagbot"))


def _table(title: str, header: list[str], rows: list[str], note: str) -> Rendered:
    blocks = [section(text) for text in table_sections(title, header, rows)]
    if note:
        blocks.append(context(clip_escaped(note, MAX_SECTION)))
    return Rendered(blocks, summary(title or "table"))


def mark(verdict: str) -> str:
    """The visible sign of a comparison row: ✗ for worse, ✓ for better, blank otherwise."""
    if verdict in BAD:
        return "✗"
    return "✓" if verdict in GOOD else " "


def _comparison(block: MetricComparison) -> Rendered:
    columns = ("", "metric", "before", "after", "change", "verdict")
    rows = [
        (mark(row.verdict), row.metric, row.before, row.after, row.change, row.verdict) for row in block.rows
    ]
    header, lines = table_lines(columns, rows, right=(False, False, True, True, True, False))
    return _table(block.title, header, lines, block.note)


def _highlighted(block: JournalExcerpt) -> set[int]:
    if not block.highlight:
        return set()
    exact = {i for i, line in enumerate(block.lines) if line == block.highlight}
    return exact or {i for i, line in enumerate(block.lines) if block.highlight in line}


def _preview(count: int, marked: set[int]) -> list[int | None]:
    """Indices shown inline from a long excerpt (None is a gap): its start, then around the
    first highlighted line when that is further down."""
    shown: list[int | None] = list(range(min(PREVIEW_HEAD, count)))
    first = min(marked) if marked else None
    if first is not None and first >= PREVIEW_HEAD:
        start = max(PREVIEW_HEAD, first - 2)
        if start > PREVIEW_HEAD:
            shown.append(None)
        shown.extend(range(start, min(count, first + 3)))
    last = shown[-1] if shown else None
    if last is not None and last < count - 1:
        shown.append(None)
    return shown


def _journal_lines(
    block: JournalExcerpt, shown: list[int | None], marked: set[int], budget: int
) -> list[str]:
    entries = [
        (f"⋮ ({count_gap(shown, i, len(block.lines))} more lines)", False)
        if index is None
        else (
            (HIGHLIGHT_MARK if index in marked else PLAIN_MARK) + _one_line(block.lines[index]),
            index in marked,
        )
        for i, index in enumerate(shown)
    ]
    for other, highlighted in _LINE_CAPS:
        lines = [clip_escaped(raw, highlighted if hot else other) for raw, hot in entries]
        if sum(len(line) + 1 for line in lines) <= budget:
            return lines
    return lines[: max(1, budget // 41)]


def count_gap(shown: list[int | None], at: int, total: int) -> int:
    """Lines hidden by the gap at position `at` of a preview."""
    before = next((index for index in reversed(shown[:at]) if index is not None), -1)
    after = next((index for index in shown[at + 1 :] if index is not None), total)
    return after - before - 1


def _one_line(line: str) -> str:
    """A journal line as one line of a code block (a stray newline or ``` would break it)."""
    return fence_safe(line.replace("\r", "␍").replace("\n", "␤"))


def _file_name(node: str, count: int) -> str:
    return f"journal-{_UNSAFE_NAME.sub('_', node).strip('_') or 'node'}-{count}.txt"


def _journal(block: JournalExcerpt) -> Rendered:
    marked = _highlighted(block)
    command = " ".join(block.command.split("\n"))
    shown_command = clip_escaped(command, MAX_SECTION - 200)
    node = clip_escaped(block.node.strip(), 100) or "?"
    if not command.strip():
        shown_command = "_(no command)_"
    elif "`" not in command:
        shown_command = f"`{shown_command}`"
    where = f"on {node}: {shown_command}"
    extra = []
    if block.match_count is not None:
        extra.append(f"{block.match_count} matching line{'s' if block.match_count != 1 else ''}")
    if not block.complete:
        extra.append("stopped reading early: the count is a lower bound")
    budget = MAX_SECTION - CODE_OVERHEAD - len(ATTACHED) - 1
    everything = [
        escape((HIGHLIGHT_MARK if i in marked else PLAIN_MARK) + _one_line(line))
        for i, line in enumerate(block.lines)
    ]
    fits = len(block.lines) <= INLINE_EXCERPT_LINES and sum(len(line) + 1 for line in everything) <= budget
    fits = fits and len(escape(command)) <= MAX_SECTION - 200
    blocks: list[BlockDict] = []
    if block.title:
        blocks.append(section(bold_title(block.title)))
    blocks.append(context(where, *extra))
    files: list[FileUpload] = []
    if fits:
        blocks.append(section(code_block(everything or ["(no lines)"])))
    else:
        inline = _journal_lines(block, _preview(len(block.lines), marked), marked, budget)
        blocks.append(section(code_block(inline or ["(no lines)"]) + "\n" + ATTACHED))
        files.append(
            FileUpload(
                filename=_file_name(block.node, len(block.lines)),
                content=f"# {block.title}\n# on {block.node}: {command}\n" + "\n".join(block.lines) + "\n",
                title=block.title or f"journal on {block.node}",
                initial_comment=safe_cut(
                    f"Full excerpt on {escape(block.node)} ({len(block.lines)} lines): `{escape(command)}`",
                    MAX_SECTION,
                ),
            )
        )
    return Rendered(blocks, summary(f"{block.title or 'journal'} on {block.node}"), files)


def _chart(block: ChartBlock) -> Rendered:
    title = bold_title(block.title) or "*chart*"
    elements = [f"📈 {title}"] + ([clip_escaped(block.alt, MAX_SECTION)] if block.alt else [])
    return Rendered([context(*elements)], summary(block.title or "chart"), images=[Path(block.path)])


def _verdict(block: VerdictBlock) -> Rendered:
    word = clip_escaped(fence_safe(" ".join(block.verdict.split()).upper()), 60)
    headline = fence_safe(" ".join(block.headline.split()))  # a stray ``` must not open a code block
    head = f"{verdict_emoji(block.verdict)} *{word}* {clip_escaped(headline, 1000)}"
    bullets: list[str] = []
    for detail in block.details:
        pieces = cut_escaped(fence_safe(" ".join(detail.split())), MAX_SECTION - 10)
        bullets.extend([f"• {pieces[0]}", *pieces[1:]])
    groups = pack([head, *bullets], MAX_SECTION)
    blocks = [section("\n".join(group)) for group in groups]
    return Rendered(blocks, summary(f"{block.verdict}: {block.headline}"))
