"""`hypothesis`, `log`, `baseline [show|diff]`: what the store remembers of a target.

Why a result with lines and tables: the CLI prints them as rich tables (or the whole document
with `--json`), Slack as blocks; both show the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.app.context import AppContext
from bot.commands import Invocation
from bot.loop import records_view


@dataclass(frozen=True)
class RecordTable:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class RecordsAnswer:
    """The answer: lines of text, tables, whether it is what was asked (False: e.g. no baseline
    pinned yet), and the whole document (`--json`)."""

    document: dict[str, Any]

    @property
    def ok(self) -> bool:
        return bool(self.document.get("ok", True))

    @property
    def lines(self) -> list[str]:
        return [str(line) for line in self.document.get("lines", [])]

    @property
    def tables(self) -> list[RecordTable]:
        return [
            RecordTable(
                table["title"],
                tuple(str(c) for c in table["columns"]),
                tuple(tuple(str(cell) for cell in row) for row in table["rows"]),
            )
            for table in self.document.get("tables", [])
        ]

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **self.document}  # a document that says `ok` itself keeps its own


async def read_records(ctx: AppContext, invocation: Invocation, target: str, *, actor: str) -> RecordsAnswer:
    """Read (or, `hypothesis add|close`, write) the target's records; LookupError or ValueError
    naming what is missing or wrong."""
    document = await ctx.store.run(records_view.read, ctx.store.store, invocation, target, actor=actor)
    return RecordsAnswer(document)
