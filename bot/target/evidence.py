"""Evidence as data: typed blocks that a reporter (console, Slack thread, test memory) renders.

Why typed blocks and not text: the same finding is shown as a rich table in a terminal, as
Block Kit sections in Slack (with its 3,000-character limit and file uploads for long
excerpts), and as JSON for scripts. A journal excerpt always carries the exact command that
produced it, so a human can re-run it on the host and see the same lines.
"""

from __future__ import annotations

from collections.abc import Mapping
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


@dataclass(frozen=True)
class ComparisonRow:
    """One metric before and after a change; cells are already text (`48`, `26`, `-45.8 %`)."""

    metric: str
    before: str
    after: str
    change: str
    verdict: str
    """improved, regressed, no-effect, pass, fail, ... (a renderer colours by it)."""

    def to_json(self) -> dict[str, str]:
        return {
            "metric": self.metric,
            "before": self.before,
            "after": self.after,
            "change": self.change,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class MetricComparison:
    """Metrics of two runs side by side: the core of every verdict an experiment reports."""

    title: str
    rows: tuple[ComparisonRow, ...]
    note: str = ""
    kind: Literal["comparison"] = "comparison"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "rows": [row.to_json() for row in self.rows],
            "note": self.note,
        }


@dataclass(frozen=True)
class ChartBlock:
    """A PNG on disk (a terminal prints the path, Slack uploads the file); `alt` says what it shows."""

    title: str
    path: str
    alt: str = ""
    kind: Literal["chart"] = "chart"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "title": self.title, "path": self.path, "alt": self.alt}


@dataclass(frozen=True)
class VerdictBlock:
    """The answer first: one verdict word, a headline sentence, then the lines that justify it."""

    verdict: str
    headline: str
    details: tuple[str, ...] = ()
    kind: Literal["verdict"] = "verdict"

    @property
    def title(self) -> str:
        return self.headline

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "verdict": self.verdict,
            "headline": self.headline,
            "details": list(self.details),
        }


Evidence = TextBlock | TableBlock | JournalExcerpt | MetricComparison | ChartBlock | VerdictBlock


def evidence_from_json(data: Mapping[str, Any]) -> Evidence:
    """A block back from its `to_json()` (stored evidence, a `--json` document); unknown kinds raise."""
    kind = data.get("kind")
    if kind == "text":
        return TextBlock(data["text"], data.get("title", ""))
    if kind == "table":
        rows = tuple(tuple(str(cell) for cell in row) for row in data["rows"])
        return TableBlock(data["title"], tuple(data["columns"]), rows, data.get("note", ""))
    if kind == "journal":
        return JournalExcerpt(
            data["title"],
            data["node"],
            data["command"],
            tuple(data["lines"]),
            match_count=data.get("match_count"),
            complete=data.get("complete", True),
            highlight=data.get("highlight"),
        )
    if kind == "comparison":
        return MetricComparison(
            data["title"], tuple(ComparisonRow(**row) for row in data["rows"]), data.get("note", "")
        )
    if kind == "chart":
        return ChartBlock(data["title"], data["path"], data.get("alt", ""))
    if kind == "verdict":
        return VerdictBlock(data["verdict"], data["headline"], tuple(data.get("details", ())))
    raise ValueError(f"unknown evidence kind {kind!r}")


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
