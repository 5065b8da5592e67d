"""Which reply of an investigation thread a piece of evidence belongs in.

Why a fixed handful of parts: a reader follows a try as a story (what preflight found, what was
changed, how the server started and what capacity it made effective, what the benchmark saw,
the verdict and what to suspect), so the thread has one reply per part, whatever the number of
blocks each step emits. The part is chosen by the step that emitted the block, and for a few
kinds by the block itself (a chart is always benchmark evidence, the capacity comparison
always start evidence). A table too long to read in a thread goes up as a file.
"""

from __future__ import annotations

import re

from bot.app.target_commands import LEASE_STEP, SETTLE_STEP
from bot.slack.render import FileUpload
from bot.slack.render_tables import escape, table_lines
from bot.target.evidence import ChartBlock, Evidence, MetricComparison, TableBlock

SECTION_TITLES = {
    "preflight": "Preflight",
    "change": "The change",
    "start": "Start and capacity",
    "benchmark": "Benchmark and chart",
    "details": "Verdict and hypotheses",
}
"""The parts of a thread, in the order a try reaches them, and the title each reply opens with."""
SECTION_OF_STEP = {
    SETTLE_STEP: "preflight",
    LEASE_STEP: "preflight",
    "rollback": "start",
    "reconcile": "start",
    "heal": "preflight",
    "preflight": "preflight",
    "open_hypothesis": "change",
    "snapshot_before": "change",
    "plan_revert": "change",
    "plan_restart": "change",
    "apply": "change",
    "await_start": "start",
    "restart": "start",
    "observe_now": "start",
    "restore": "start",
    "measure before": "benchmark",
    "measure after": "benchmark",
    "measure": "benchmark",
}
"""The part of each step's evidence (a playbook's, or rollback's, reconcile's and bench's own);
a bench's `benchmark (profile …)` step is `benchmark`; any other step (compare, propose, decide,
...) is `details`."""
LONG_TABLE_ROWS = 12
"""A table with more rows than this is uploaded as a file and linked (a phone shows ~12 lines)."""
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def section_of(step: str | None, block: Evidence) -> str:
    """The part of the thread `block`, emitted during `step` (None: before any step), goes in."""
    if isinstance(block, ChartBlock):
        return "benchmark"
    if isinstance(block, MetricComparison) and block.title.lower().startswith("capacity"):
        return "start"
    if step is None:
        return "preflight"
    flat = " ".join(step.split())
    if flat.startswith("benchmark ("):
        return "benchmark"
    return SECTION_OF_STEP.get(flat, "details")


def long_table_file(block: Evidence) -> FileUpload | None:
    """A table longer than LONG_TABLE_ROWS as a text file (its columns laid out as in the thread);
    None for any other block."""
    if not isinstance(block, TableBlock) or len(block.rows) <= LONG_TABLE_ROWS:
        return None
    header, rows = table_lines(block.columns, block.rows)
    name = _UNSAFE_NAME.sub("_", block.title.lower()).strip("_")[:60] or "table"
    note = f"\n{block.note}\n" if block.note else ""
    return FileUpload(
        filename=f"{name}.txt",
        content=f"{block.title}\n\n{header}\n" + "\n".join(rows) + "\n" + note,
        title=block.title or "table",
        initial_comment=escape(f"{block.title} ({len(block.rows)} rows)"),  # shown as mrkdwn
    )
