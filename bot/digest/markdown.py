"""`render_markdown`: the digest as Markdown for a wiki page or an e-mail.

A normal week is listed whole (Slack shows the first lines of a long section; the Markdown is
the record). A week of thousands is summarised instead: each list shows `MAX_ROWS` entries (the
experiments table the ones that matter most, see `_notable`) and counts the rest, because
100,000 table rows are 19 MB nobody reads and took seconds to write; `limit=None`
(`flagbot digest --markdown --all`) lists everything, and `--json` always does. Text from the
store is escaped so a statement with `*` or `|` cannot break the layout; flags are in code spans.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from typing import TypeVar

from bot.digest.chart import BAD, GOOD
from bot.digest.model import Digest, ExperimentLine, FlagDecision, HypothesisLine, ThreadLink
from bot.digest.words import capacity_change, decision, glance, local_time, nothing_happened, verdict

__all__ = ["MAX_ROWS", "render_markdown"]

MAX_ROWS = 500
"""Entries per list of one week's Markdown unless every one is asked for (`limit=None`)."""

T = TypeVar("T")

_SPECIAL = re.compile(r"([\\`*_\[\]<|])")
"""What could start emphasis, code, a link, HTML or a table cell mid-line (every line the digest
writes starts with its own `#`, `-` or `|`, so `#` and `>` are safe inside)."""


def md(text: str) -> str:
    """Text with Markdown's special characters escaped, on one line."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def code(text: str) -> str:
    """A code span (a backtick inside becomes an apostrophe: a span cannot hold its own fence)."""
    flat = " ".join(str(text).split()).replace("`", "'")
    return f"`{flat}`" if flat else ""


def link(thread: ThreadLink | None) -> str:
    if thread is None:
        return "-"
    if thread.permalink:
        return f"[thread]({thread.permalink.replace(')', '%29')})"
    return f"{md(thread.channel)} {md(thread.ts)}"


def render_markdown(digest: Digest, *, chart_path: str | None = None, limit: int | None = MAX_ROWS) -> str:
    """The digest; `chart_path` adds the chart as an image (where the PNG was written). `limit`:
    entries per list before the rest are counted (None: all of them)."""
    out = [f"# {md(digest.title())}", "", f"_{md(digest.period())}_", ""]
    if digest.empty:
        out += [md(nothing_happened(digest)), ""]
    out += [f"**At a glance:** {md(glance(digest))}", ""]
    cut = _Cut(digest, limit)
    out += _experiments(digest, cut)
    out += _not_started(digest, cut)
    out += _hypotheses(digest, cut)
    out += _flags(digest, cut)
    out += _incidents(digest, cut)
    out += _checks(digest, cut)
    out += _learned(digest, cut)
    out += _predictions(digest, cut)
    if chart_path:
        out += [
            "## Capacity and throughput",
            "",
            f"![effective capacity and output throughput]({chart_path})",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


class _Cut:
    """At most `limit` entries of a list, and the sentence that counts the rest."""

    def __init__(self, digest: Digest, limit: int | None) -> None:
        self.limit = limit
        self.everything = (
            f"`flagbot digest --week {digest.week} --markdown --all` lists every one (`--json` too)"
        )

    def first(self, items: Sequence[T]) -> list[T]:
        return list(items if self.limit is None else items[: self.limit])

    def rest(self, items: Sequence[object], noun: str) -> list[str]:
        """`…and 1,234 more <noun>: ...` when the list was cut, else nothing."""
        left = len(items) - self.limit if self.limit is not None else 0
        return [f"…and {left:,} more {noun}, not shown: {self.everything}."] if left > 0 else []


def _rank(line: ExperimentLine) -> int:
    """What a reader of a huge week needs first: a regression or a failure, then a change kept
    or reverted, then an improvement, then the rest."""
    if line.verdict in BAD or line.status != "succeeded":
        return 0
    if line.kept is not None:
        return 1
    return 2 if line.verdict in GOOD else 3


def _notable(lines: Sequence[ExperimentLine], limit: int | None) -> list[ExperimentLine]:
    """All the lines when they fit; else the `limit` that rank first (`_rank`, then oldest), in
    time order."""
    if limit is None or len(lines) <= limit:
        return list(lines)
    chosen = heapq.nsmallest(limit, range(len(lines)), key=lambda k: (_rank(lines[k]), k))
    return [lines[k] for k in sorted(chosen)]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _experiments(digest: Digest, cut: _Cut) -> list[str]:
    out = ["## Experiments", ""]
    shown = _notable(digest.experiments, cut.limit)
    if len(shown) < len(digest.experiments):
        out += [
            f"The {len(shown):,} of {len(digest.experiments):,} that matter most: regressions and "
            "failures first, then changes kept or reverted, then improvements; in time order.",
            "",
        ]
    if not digest.experiments:
        return [*out, "No experiments this week.", ""]
    out.append(
        _row(
            [
                "#",
                "when",
                "target",
                "playbook",
                "what",
                "verdict",
                "max_running_requests",
                "decision",
                "thread",
            ]
        )
    )
    out.append(_row(["---"] * 9))
    for line in shown:
        out.append(
            _row(
                [
                    str(line.id),
                    md(local_time(digest, line.at)),
                    md(line.target),
                    md(line.playbook),
                    code(line.what),
                    f"**{md(verdict(line))}**",
                    md(capacity_change(line.capacity_before, line.capacity_after)),
                    md(decision(line)),
                    link(line.thread),
                ]
            )
        )
    more = len(digest.experiments) - len(shown)
    if more:
        out += ["", f"…and {more:,} more experiments, not shown: {cut.everything}."]
    return [*out, ""]


def _not_started(digest: Digest, cut: _Cut) -> list[str]:
    """Runs that never reached a node: apart from the experiments, only when there are any."""
    if not digest.not_started:
        return []
    bullets = [
        f"- #{line.id} {md(line.playbook)} on {md(line.target)} ({md(local_time(digest, line.at))}), "
        f"{code(line.what)}: {md(line.not_started or '')}"
        for line in cut.first(digest.not_started)
    ]
    bullets += cut.rest(digest.not_started, "runs")
    return _section("Not started: could not connect", bullets, "None.")


def _hypothesis(line: HypothesisLine, digest: Digest) -> str:
    because = f" — {md(line.because)}" if line.because else ""
    return (
        f"- H{line.id} ({md(line.target)}, {md(local_time(digest, line.at))}): {md(line.statement)}{because}"
    )


def _hypotheses(digest: Digest, cut: _Cut) -> list[str]:
    out = ["## Hypotheses", ""]
    groups = (
        ("Confirmed", digest.confirmed),
        ("Refuted", digest.refuted),
        ("Inconclusive", digest.inconclusive),
        ("Still open", digest.still_open),
    )
    for title, rows in groups:
        out += [f"### {title} ({len(rows)})", ""]
        out += [_hypothesis(h, digest) for h in cut.first(rows)] or ["None."]
        out += cut.rest(rows, "hypotheses")
        out.append("")
    return out


def _decision(item: FlagDecision) -> str:
    return f"- {code(item.change)} on {md(item.target)} (#{item.experiment_id}, {md(item.why)})"


def _flags(digest: Digest, cut: _Cut) -> list[str]:
    out = ["## Flags", "", f"### Kept ({len(digest.kept)})", ""]
    out += [_decision(d) for d in cut.first(digest.kept)] or ["None."]
    out += cut.rest(digest.kept, "kept")
    out += ["", f"### Reverted ({len(digest.reverted)})", ""]
    out += [_decision(d) for d in cut.first(digest.reverted)] or ["None."]
    out += cut.rest(digest.reverted, "reverted")
    out += ["", "### Now against the baseline", ""]
    if not digest.targets:
        return [*out, "No targets.", ""]
    out.append(
        _row(["target", "baseline", "max_running_requests (baseline → now)", "differences from the baseline"])
    )
    out.append(_row(["---"] * 4))
    for t in digest.targets:
        base = f"#{t.baseline_id} (snapshot #{t.baseline_snapshot_id})" if t.baseline_id else "-"
        diffs = ", ".join(code(d) for d in t.differences) or md(t.note or "-")
        out.append(
            _row([md(t.target), md(base), md(capacity_change(t.baseline_capacity, t.capacity)), diffs])
        )
    return [*out, ""]


def _section(title: str, bullets: list[str], empty: str) -> list[str]:
    """`## title`, then the bullets (or the sentence saying there are none)."""
    return [f"## {title}", "", *(bullets or [empty]), ""]


def _incidents(digest: Digest, cut: _Cut) -> list[str]:
    rows = sorted([*digest.failed_starts, *digest.rollbacks], key=lambda i: (i.at, i.experiment_id, i.kind))
    bullets = [
        f"- #{i.experiment_id} {md(i.kind)} on {md(i.target)} ({md(local_time(digest, i.at))}): {md(i.text)}"
        for i in cut.first(rows)
    ]
    bullets += cut.rest(rows, "failed starts and rollbacks")
    return _section("Failed starts and rollbacks", bullets, "None.")


def _checks(digest: Digest, cut: _Cut) -> list[str]:
    if digest.checks is None:
        note = md(digest.checks_note or "no checks recorded")
        return _section("Failed checks", [], note[:1].upper() + note[1:] + ".")
    bullets = [
        f"- {md(c.name)} on {md(c.target or '-')}"
        + (f" (#{c.experiment_id})" if c.experiment_id else "")
        + f", {md(local_time(digest, c.at))}: {md(c.text)}"
        for c in cut.first(digest.checks)
    ]
    bullets += cut.rest(digest.checks, "failed checks")
    return _section("Failed checks", bullets, "None failed.")


def _predictions(digest: Digest, cut: _Cut) -> list[str]:
    """The capacity each try predicted before its restart against what its start measured; only
    when the week had one."""
    if not digest.predictions:
        return []
    bullets = [
        f"- #{p.experiment_id} ({md(p.target)}, {md(local_time(digest, p.at))}): {md(p.text)}"
        for p in cut.first(digest.predictions)
    ]
    bullets += cut.rest(digest.predictions, "predictions")
    missed = sum(1 for p in digest.predictions if p.missed)
    return _section(f"Capacity predicted before the restart ({missed} missed)", bullets, "None.")


def _learned(digest: Digest, cut: _Cut) -> list[str]:
    bullets = [
        f"- {code(o.flag)} ({md(o.kind)}, {md(o.target)}"
        + (f", #{o.experiment_id}" if o.experiment_id else "")
        + f"): {md(o.text)}"
        for o in cut.first(digest.learned)
    ]
    bullets += cut.rest(digest.learned, "observations")
    return _section("What we learned", bullets, "No new observations.")
