"""Evidence blocks as a terminal shows them; Slack renders the same blocks its own way.

One renderer for every command that prints evidence (`observe`, `rollback`, a playbook run),
so a block looks the same whichever command produced it.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

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


def render_evidence(console: Console, blocks: Iterable[Evidence]) -> None:
    """Print each block followed by a blank line."""
    for block in blocks:
        render_block(console, block)
        console.print()


def render_block(console: Console, block: Evidence) -> None:
    if isinstance(block, TableBlock):
        table = Table(title=block.title, title_justify="left", caption=block.note or None)
        for column in block.columns:
            table.add_column(column)
        for row in block.rows:
            table.add_row(*row)
        console.print(table)
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
        table = Table(title=block.title, title_justify="left", caption=block.note or None)
        for column in ("metric", "before", "after", "change", "verdict"):
            table.add_column(column, justify="left" if column in ("metric", "verdict") else "right")
        for item in block.rows:
            verdict = f"[{verdict_style(item.verdict)}]{item.verdict}[/]"
            table.add_row(item.metric, item.before, item.after, item.change, verdict)
        console.print(table)
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
