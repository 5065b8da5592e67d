"""Evidence blocks as a terminal shows them; Slack renders the same blocks its own way.

One renderer for every command that prints evidence (`observe`, `rollback`, a playbook run),
so a block looks the same whichever command produced it, and one way to print a table
(`print_table`) for every CLI table: as a table where it fits the terminal, stacked
(`bot.loop.table_layout`) where it does not, so an 80-column terminal never shows a column
squeezed to one word per line.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from bot.loop.table_layout import stacked_records
from bot.target.evidence import (
    ChartBlock,
    Evidence,
    JournalExcerpt,
    MetricComparison,
    TableBlock,
    TextBlock,
    VerdictBlock,
)

VERDICT_STYLES = {
    "improved": "bold green",
    "pass": "bold green",
    "found": "bold green",
    "succeeded": "bold green",
    "regressed": "bold red",
    "fail": "bold red",
    "failed": "bold red",
    "failed-to-start": "bold red",
    "no-effect": "bold yellow",
    "inconclusive": "bold yellow",
    "not-found": "bold yellow",
    "not-measured": "bold yellow",
    "not measured": "bold yellow",
    "not-reproduced": "bold yellow",
}


def verdict_style(verdict: str) -> str:
    return VERDICT_STYLES.get(verdict, "bold")


UNBOUNDED = 1_000_000
"""A width no table reaches: the table measured as it would be drawn with no wrapping at all."""

Cell = str | Text
"""A table cell: plain text (shown as written, never read as rich markup) or styled text."""


def print_table(
    console: Console,
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    right: Collection[int] = (),
    caption: str = "",
) -> None:
    """A table on the terminal: drawn as a table when every cell fits on one line within the
    console's width, else stacked, one record per row (`bot.loop.table_layout`) with no line
    wider than the console. `right`: the indices of the columns to right-align (numbers)."""
    styled = [[cell if isinstance(cell, Text) else Text(cell) for cell in row] for row in rows]
    table = Table(title=title or None, title_justify="left", caption=caption or None)
    for index, column in enumerate(columns):
        table.add_column(column, justify="right" if index in right else "left", no_wrap=True)
    for row in styled:
        table.add_row(*row)
    natural = Measurement.get(console, console.options.update_width(UNBOUNDED), table).maximum
    if natural <= console.width:
        console.print(table)
        return
    if title:
        console.print(title, style="bold", markup=False, highlight=False)
    plain = [[cell.plain for cell in row] for row in styled]
    for record in stacked_records(columns, plain, console.width):
        for line in record:
            console.print(line, markup=False, highlight=False)
    if caption:
        console.print(caption, markup=False, highlight=False)


def render_evidence(console: Console, blocks: Iterable[Evidence]) -> None:
    """Print each block followed by a blank line."""
    for block in blocks:
        render_block(console, block)
        console.print()


def render_block(console: Console, block: Evidence) -> None:
    if isinstance(block, TableBlock):
        print_table(console, block.title, block.columns, block.rows, caption=block.note)
    elif isinstance(block, TextBlock):
        if block.title:
            console.print(f"[bold]{block.title}[/bold]")
        console.print(block.text, markup=False, highlight=False)
    elif isinstance(block, JournalExcerpt):
        console.print(block.title, style="bold", markup=False, soft_wrap=True)
        console.print(f"  on {block.node}: {block.command}", markup=False, soft_wrap=True)
        for line in block.lines:
            style = "bold red" if block.highlight and line == block.highlight else None
            console.print(line, markup=False, highlight=False, style=style, soft_wrap=True)
    elif isinstance(block, MetricComparison):
        rows = [
            (
                item.metric,
                item.before,
                item.after,
                item.change,
                Text(item.verdict, verdict_style(item.verdict)),
            )
            for item in block.rows
        ]
        columns = ("metric", "before", "after", "change", "verdict")
        print_table(console, block.title, columns, rows, right=(1, 2, 3), caption=block.note)
    elif isinstance(block, ChartBlock):
        console.print(block.title, style="bold", markup=False)
        console.print(f"  chart: {block.path}", markup=False, soft_wrap=True)
        if block.alt:
            console.print(f"  {block.alt}", markup=False, highlight=False)
    elif isinstance(block, VerdictBlock):
        console.print(f"{block.verdict.upper()}", style=verdict_style(block.verdict), end=" ")
        console.print(block.headline, markup=False, highlight=False)
        for line in block.details:
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
