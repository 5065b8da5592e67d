"""`render_blocks`: the digest as Block Kit, within Slack's limits (bot/slack/render_tables.py).

A header, the week and the counts, then one titled part per section as bullet lines packed
into sections of at most 3,000 characters. A long section shows its first `MAX_LINES` lines
and says how many more there are (`flagbot digest --markdown --all` lists them all),
so a week of thousands of experiments is still one or two messages; `messages()` splits the
blocks at 50 per message. Every text from the store is escaped; an experiment links to its
thread by permalink when one was recorded, else names the channel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from bot.digest.model import Digest, ExperimentLine, FlagDecision, HypothesisLine, TargetFlags
from bot.digest.words import capacity_change, glance, local_time, nothing_happened, verdict
from bot.slack.card import verdict_emoji
from bot.slack.render import MAX_HEADER, MAX_SECTION, Rendered, escape
from bot.slack.render_tables import (
    BlockDict,
    bold_title,
    clip_escaped,
    context,
    pack,
    plain,
    safe_cut,
    section,
    summary,
)

__all__ = ["MAX_LINES", "render_blocks"]

MAX_LINES = 25
"""Lines shown per section in Slack; the rest are counted."""
MAX_URL = 300
"""A longer permalink is not linked (it would crowd the line); the channel is named instead."""
LINE_CHARS = 1000
"""Escaped characters of one bullet line: its pieces are clipped below this; the final guard."""

T = TypeVar("T")


def _code(raw: str) -> str:
    flat = " ".join(raw.split()).replace("`", "'")
    return f"`{clip_escaped(flat, 300)}`" if flat else ""


def _ref(line: ExperimentLine) -> str:
    thread = line.thread
    if thread is None:
        return f"#{line.id}"
    url = thread.permalink or ""
    if url and len(url) <= MAX_URL and not any(c in url for c in "|<> "):
        return f"<{escape(url)}|#{line.id}>"
    return f"#{line.id} (<#{clip_escaped(thread.channel, 30)}>)"


def _experiment(digest: Digest, line: ExperimentLine) -> str:
    word = verdict(line)
    cap = capacity_change(line.capacity_before, line.capacity_after)
    tail = f" (max_running_requests {escape(cap)})" if cap != "-" else ""
    if line.kept is not None:
        tail += ", kept" if line.kept else ", reverted"
    return (
        f"{verdict_emoji(line.verdict or line.status)} {_ref(line)} {escape(local_time(digest, line.at))} "
        f"{clip_escaped(line.playbook, 40)} {_code(line.what)} on {clip_escaped(line.target, 80)}: "
        f"*{clip_escaped(word, 80)}*{tail}"
    )


def _hypothesis(line: HypothesisLine) -> str:
    because = f" — {clip_escaped(line.because, 300)}" if line.because else ""
    return f"H{line.id} ({clip_escaped(line.target, 80)}): {clip_escaped(line.statement, 400)}{because}"


def _decision(item: FlagDecision) -> str:
    return (
        f"{_code(item.change)} on {clip_escaped(item.target, 80)} "
        f"(#{item.experiment_id}, {clip_escaped(item.why, 120)})"
    )


def _part(
    title: str, items: Sequence[T], line: Callable[[T], str], *, empty: str, more: str
) -> list[BlockDict]:
    """A titled part: the first MAX_LINES items as bullet lines packed into sections, then a
    count. Only the lines shown are written (a week of 100,000 experiments shows 25)."""
    shown = [f"• {safe_cut(line(item), LINE_CHARS)}" for item in items[:MAX_LINES]]
    if len(items) > MAX_LINES:
        shown.append(f"_…and {len(items) - MAX_LINES} more: {more}_")
    body = shown or [f"_{empty}_"]
    groups = pack([bold_title(title), *body], MAX_SECTION)
    return [section("\n".join(group)) for group in groups]


def render_blocks(digest: Digest, *, chart: Path | None = None) -> Rendered:
    """Block Kit for the digest; `chart` (a PNG path) is carried as an image to upload."""
    more = f"`flagbot digest --week {digest.week} --markdown --all` lists them all"
    blocks: list[BlockDict] = [
        {"type": "header", "text": plain(digest.title(), MAX_HEADER)},
        context(escape(digest.period())),
    ]
    if digest.empty:
        blocks.append(section(clip_escaped(nothing_happened(digest), MAX_SECTION)))
    blocks.append(section(f"*At a glance*\n{clip_escaped(glance(digest), MAX_SECTION - 20)}"))
    blocks.append({"type": "divider"})
    blocks += _part(
        f"Experiments ({len(digest.experiments)})",
        digest.experiments,
        lambda line: _experiment(digest, line),
        empty="no experiments this week",
        more=more,
    )
    if digest.not_started:  # runs that never reached a node: apart, not counted as failed experiments
        blocks += _part(
            f"Not started: could not connect ({len(digest.not_started)})",
            digest.not_started,
            lambda line: (
                f"#{line.id} {escape(line.playbook)} on {clip_escaped(line.target, 80)}: "
                f"{clip_escaped(line.not_started or '', 400)}"
            ),
            empty="none",
            more=more,
        )
    hypotheses = [
        *(("✅ confirmed", h) for h in digest.confirmed),
        *(("❌ refuted", h) for h in digest.refuted),
        *(("❔ inconclusive", h) for h in digest.inconclusive),
        *(("⏳ still open", h) for h in digest.still_open),
    ]
    blocks += _part(
        f"Hypotheses ({len(digest.confirmed)} confirmed, {len(digest.refuted)} refuted, "
        f"{len(digest.still_open)} still open)",
        hypotheses,
        lambda item: f"{item[0]}: {_hypothesis(item[1])}",
        empty="no hypotheses resolved or open",
        more=more,
    )
    flags = [("kept", d) for d in digest.kept] + [("reverted", d) for d in digest.reverted]
    blocks += _part(
        f"Flags ({len(digest.kept)} kept, {len(digest.reverted)} reverted)",
        flags,
        lambda item: f"{item[0]} {_decision(item[1])}",
        empty="no flag changed",
        more=more,
    )
    blocks += _part("Now against the baseline", digest.targets, _baseline, empty="no targets", more=more)
    incidents = sorted(
        [*digest.failed_starts, *digest.rollbacks], key=lambda i: (i.at, i.experiment_id, i.kind)
    )
    blocks += _part(
        f"Failed starts ({len(digest.failed_starts)}) and rollbacks ({len(digest.rollbacks)})",
        incidents,
        lambda i: (
            f"#{i.experiment_id} {escape(i.kind)} on {clip_escaped(i.target, 80)}: {clip_escaped(i.text, 400)}"
        ),
        empty="none",
        more=more,
    )
    blocks += _part(
        "Failed checks" + (f" ({len(digest.checks)})" if digest.checks is not None else ""),
        digest.checks or [],
        lambda c: (
            f"{clip_escaped(c.name, 80)} on {clip_escaped(c.target or '-', 80)}"
            + (f" (#{c.experiment_id})" if c.experiment_id else "")
            + f": {clip_escaped(c.text, 400)}"
        ),
        empty=escape(digest.checks_note or "no checks recorded") if digest.checks is None else "none failed",
        more=more,
    )
    blocks += _part(
        f"What we learned ({len(digest.learned)})",
        digest.learned,
        lambda o: (
            f"{_code(o.flag)} ({clip_escaped(o.kind, 40)}, {clip_escaped(o.target, 80)}"
            + (f", #{o.experiment_id}" if o.experiment_id else "")
            + f"): {clip_escaped(o.text, 500)}"
        ),
        empty="no new observations",
        more=more,
    )
    if digest.predictions:
        blocks += _part(
            f"Capacity predicted before the restart ({sum(1 for p in digest.predictions if p.missed)} missed)",
            digest.predictions,
            lambda p: f"#{p.experiment_id} on {clip_escaped(p.target, 80)}: {clip_escaped(p.text, 400)}",
            empty="none",
            more=more,
        )
    text = summary(f"{digest.title()}: {glance(digest)}")
    return Rendered(blocks, text, images=[chart] if chart is not None else [])


def _baseline(t: TargetFlags) -> str:
    cap = capacity_change(t.baseline_capacity, t.capacity)
    diffs = ", ".join(_code(d) for d in t.differences) or escape(t.note or "-")
    base = f"baseline #{t.baseline_id}" if t.baseline_id else "no baseline"
    return f"*{clip_escaped(t.target, 80)}* ({base}; max_running_requests {escape(cap)}): {diffs}"
