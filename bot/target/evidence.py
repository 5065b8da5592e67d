"""Evidence as data: typed blocks that a reporter (console, Slack thread, test memory) renders.

Why typed blocks and not text: the same finding is shown as a rich table in a terminal, as
Block Kit sections in Slack (with its 3,000-character limit and file uploads for long
excerpts), and as JSON for scripts. A journal excerpt always carries the exact command that
produced it, so a human can re-run it on the host and see the same lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

MAX_EXCERPT_LINE = 2000
"""Characters of one journal line kept in an excerpt (a server_args line is ~14 KB)."""


@dataclass(frozen=True)
class TextBlock:
    """A sentence or two: what happened, in words."""

    text: str
    title: str = ""
    kind: Literal["text"] = "text"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "title": self.title, "text": self.text}


@dataclass(frozen=True)
class TableBlock:
    """Rows of cells under named columns (cells are already text: the renderer only lays out)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""
    kind: Literal["table"] = "table"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "columns": list(self.columns),
            "rows": [list(row) for row in self.rows],
            "note": self.note,
        }


@dataclass(frozen=True)
class JournalExcerpt:
    """Journal lines from one node with the command that printed them.

    `match_count` is the number of lines the command matched (None when it was not a search);
    `complete` is False when flagbot stopped reading before the command's end (bounded output),
    so the count is a lower bound.
    """

    title: str
    node: str
    command: str
    lines: tuple[str, ...]
    match_count: int | None = None
    complete: bool = True
    highlight: str | None = None
    """The line that matters most (the fatal line of a failed start), if any."""
    kind: Literal["journal"] = "journal"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "node": self.node,
            "command": self.command,
            "lines": list(self.lines),
            "match_count": self.match_count,
            "complete": self.complete,
            "highlight": self.highlight,
        }


Evidence = TextBlock | TableBlock | JournalExcerpt


@dataclass
class EvidenceList:
    """An ordered collection of blocks, appended as an operation goes."""

    blocks: list[Evidence] = field(default_factory=list)

    def add(self, block: Evidence) -> Evidence:
        self.blocks.append(block)
        return block

    def to_json(self) -> list[dict[str, Any]]:
        return [block.to_json() for block in self.blocks]


def clip(line: str, limit: int = MAX_EXCERPT_LINE) -> str:
    """One line for an excerpt: carriage-return redraws and long tails shortened, visibly."""
    if "\r" in line:
        line = line.replace("\r", "␍")
    if len(line) > limit:
        return line[:limit] + f"… [{len(line) - limit} more characters]"
    return line
