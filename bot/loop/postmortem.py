"""One experiment as Markdown, for a post-mortem (`log ID markdown=yes`, `flagbot log ID --markdown`).

Why from the store only: a post-mortem is written after the fact, often when the bot that ran the
experiment is gone; everything a run did is stored before its next step starts (the experiment,
its steps, the evidence it emitted), so the document can always be rebuilt, and it says exactly
what the thread said. Secrets are masked on the way out like every other output.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bot.store import Store
from bot.store.experiments import get_experiment, list_steps
from bot.store.records import evidence_of
from bot.target.evidence import (
    ChartBlock,
    Evidence,
    JournalExcerpt,
    MetricComparison,
    TableBlock,
    TextBlock,
    VerdictBlock,
    evidence_from_json,
)

MAX_EXCERPT_LINES = 200
"""Journal lines of one excerpt kept in the document (the newest); the excerpt says how many it had."""


def experiment_markdown(store: Store, experiment_id: int, target: str) -> str:
    """The experiment as a Markdown document; LookupError for an unknown id or another target's."""
    row = get_experiment(store, experiment_id)
    if row is None:
        raise LookupError(f"no experiment #{experiment_id}")
    if row.target != target:
        raise LookupError(
            f"experiment #{experiment_id} is of target {row.target}, not {target}; add target={row.target}"
        )
    lines = [f"# Experiment #{experiment_id}: `{row.playbook}` on {row.target}", ""]
    lines += [
        f"- **Verdict:** {row.verdict or 'none'} (run {row.status})",
        f"- **Requested by:** {row.actor}",
        f"- **Started:** {_when(row.started_at or row.created_at)}; **finished:** {_when(row.finished_at)}"
        + _took(row.started_at or row.created_at, row.finished_at),
    ]
    if row.hypothesis_id is not None:
        lines.append(f"- **Hypothesis:** #{row.hypothesis_id}")
    if row.cancel_requested_by:
        lines.append(f"- **Cancel requested by:** {row.cancel_requested_by}")
    lines += _parameters(row.params)
    if row.summary:
        lines += ["", "## Summary", "", row.summary]
    steps = list_steps(store, experiment_id)
    lines += ["", "## Steps", ""]
    if steps:
        lines += _table(
            ("#", "step", "action", "status", "started (UTC)", "took", "error"),
            [
                (
                    str(step.index + 1),
                    step.name,
                    step.action,
                    step.status,
                    _when(step.started_at),
                    _took(step.started_at, step.finished_at).strip(" ()") or "-",
                    step.error or "",
                )
                for step in steps
            ],
        )
    else:
        lines.append("No step ran.")
    records = evidence_of(store, experiment_id)
    if records:
        lines += ["", "## Evidence"]
        for record in records:
            try:
                block = evidence_from_json(record.data)
            except (KeyError, ValueError, TypeError):
                lines += ["", f"### {record.title}", "", f"(stored evidence of kind {record.kind!r})"]
                continue
            step = f" (step {record.step_index + 1})" if record.step_index is not None else ""
            lines += ["", f"### {block.title or record.title}{step}", "", *_evidence(block)]
    return "\n".join(lines).rstrip() + "\n"


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S") if at is not None else "-"


def _took(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return ""
    seconds = max(0.0, (end - start).total_seconds())
    return f" ({seconds:.0f} s)" if seconds < 120 else f" ({seconds / 60:.1f} min)"


def _parameters(params: dict[str, Any]) -> list[str]:
    if not params:
        return []
    out = ["", "## Parameters", ""]
    for key, value in params.items():
        if key == "changes" and isinstance(value, list):
            shown = ", ".join(f"`{_change(change)}`" for change in value) or "none"
        elif isinstance(value, list):
            shown = ", ".join(f"`{item}`" for item in value) or "none"
        else:
            shown = f"`{json.dumps(value) if not isinstance(value, str) else value}`"
        out.append(f"- {key}: {shown}")
    return out


def _change(change: object) -> str:
    if not isinstance(change, dict):
        return str(change)
    op = str(change.get("op", ""))
    if op.startswith("env-"):
        name = change.get("env_name", "")
        return f"env set {name}={change.get('env_value', '')}" if op == "env-set" else f"env unset {name}"
    value = change.get("value")
    shown = " ".join(value) if isinstance(value, list) else ("" if value is None else str(value))
    return f"{op} {change.get('flag', '')} {shown}".strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_cell(str(cell)) for cell in row) + " |" for row in rows]
    return out


def _fenced(lines: Sequence[str]) -> list[str]:
    fence = "````" if any("```" in line for line in lines) else "```"
    return [fence, *lines, fence]


def _evidence(block: Evidence) -> list[str]:
    if isinstance(block, TextBlock):
        return [block.text]
    if isinstance(block, TableBlock):
        return _table(block.columns, block.rows) + (["", block.note] if block.note else [])
    if isinstance(block, MetricComparison):
        rows = [(r.metric, r.before, r.after, r.change, r.verdict) for r in block.rows]
        table = _table(("metric", "before", "after", "change", "verdict"), rows)
        return table + (["", block.note] if block.note else [])
    if isinstance(block, JournalExcerpt):
        kept = block.lines[-MAX_EXCERPT_LINES:]
        cut = len(block.lines) - len(kept)
        head = [f"On {block.node}: `{block.command}`"]
        if cut:
            head.append(f"(the newest {len(kept)} of {len(block.lines)} lines)")
        return [*head, "", *_fenced(kept)]
    if isinstance(block, ChartBlock):
        return [f"Chart: `{block.path}`" + (f" ({block.alt})" if block.alt else "")]
    if isinstance(block, VerdictBlock):
        return [f"**{block.verdict}**: {block.headline}", *(f"- {detail}" for detail in block.details)]
    return []
