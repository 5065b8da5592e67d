"""`render_markdown`: the digest as Markdown for a wiki page or an e-mail.

Everything is listed (Slack shows the first lines of a long section; the Markdown is the full
record). Text from the store is escaped so a statement with `*` or `|` cannot break the layout;
flags are in code spans.
"""

from __future__ import annotations

import re

from bot.digest.model import Digest, FlagDecision, HypothesisLine, ThreadLink
from bot.digest.words import capacity_change, decision, glance, local_time, nothing_happened, verdict

__all__ = ["render_markdown"]

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


def render_markdown(digest: Digest, *, chart_path: str | None = None) -> str:
    """The whole digest; `chart_path` adds the chart as an image (where the PNG was written)."""
    out = [f"# {md(digest.title())}", "", f"_{md(digest.period())}_", ""]
    if digest.empty:
        out += [md(nothing_happened(digest)), ""]
    out += [f"**At a glance:** {md(glance(digest))}", ""]
    out += _experiments(digest)
    out += _not_started(digest)
    out += _hypotheses(digest)
    out += _flags(digest)
    out += _incidents(digest)
    out += _checks(digest)
    out += _learned(digest)
    if chart_path:
        out += [
            "## Capacity and throughput",
            "",
            f"![effective capacity and output throughput]({chart_path})",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _experiments(digest: Digest) -> list[str]:
    out = ["## Experiments", ""]
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
    for line in digest.experiments:
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
    return [*out, ""]


def _not_started(digest: Digest) -> list[str]:
    """Runs that never reached a node: apart from the experiments, only when there are any."""
    if not digest.not_started:
        return []
    bullets = [
        f"- #{line.id} {md(line.playbook)} on {md(line.target)} ({md(local_time(digest, line.at))}), "
        f"{code(line.what)}: {md(line.not_started or '')}"
        for line in digest.not_started
    ]
    return _section("Not started: could not connect", bullets, "None.")


def _hypothesis(line: HypothesisLine, digest: Digest) -> str:
    because = f" — {md(line.because)}" if line.because else ""
    return (
        f"- H{line.id} ({md(line.target)}, {md(local_time(digest, line.at))}): {md(line.statement)}{because}"
    )


def _hypotheses(digest: Digest) -> list[str]:
    out = ["## Hypotheses", ""]
    groups = (
        ("Confirmed", digest.confirmed),
        ("Refuted", digest.refuted),
        ("Inconclusive", digest.inconclusive),
        ("Still open", digest.still_open),
    )
    for title, rows in groups:
        out += [f"### {title} ({len(rows)})", ""]
        out += [_hypothesis(h, digest) for h in rows] or ["None."]
        out.append("")
    return out


def _decision(item: FlagDecision) -> str:
    return f"- {code(item.change)} on {md(item.target)} (#{item.experiment_id}, {md(item.why)})"


def _flags(digest: Digest) -> list[str]:
    out = ["## Flags", "", f"### Kept ({len(digest.kept)})", ""]
    out += [_decision(d) for d in digest.kept] or ["None."]
    out += ["", f"### Reverted ({len(digest.reverted)})", ""]
    out += [_decision(d) for d in digest.reverted] or ["None."]
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


def _incidents(digest: Digest) -> list[str]:
    rows = sorted([*digest.failed_starts, *digest.rollbacks], key=lambda i: (i.at, i.experiment_id, i.kind))
    bullets = [
        f"- #{i.experiment_id} {md(i.kind)} on {md(i.target)} ({md(local_time(digest, i.at))}): {md(i.text)}"
        for i in rows
    ]
    return _section("Failed starts and rollbacks", bullets, "None.")


def _checks(digest: Digest) -> list[str]:
    if digest.checks is None:
        note = md(digest.checks_note or "no checks recorded")
        return _section("Failed checks", [], note[:1].upper() + note[1:] + ".")
    bullets = [
        f"- {md(c.name)} on {md(c.target or '-')}"
        + (f" (#{c.experiment_id})" if c.experiment_id else "")
        + f", {md(local_time(digest, c.at))}: {md(c.text)}"
        for c in digest.checks
    ]
    return _section("Failed checks", bullets, "None failed.")


def _learned(digest: Digest) -> list[str]:
    bullets = [
        f"- {code(o.flag)} ({md(o.kind)}, {md(o.target)}"
        + (f", #{o.experiment_id}" if o.experiment_id else "")
        + f"): {md(o.text)}"
        for o in digest.learned
    ]
    return _section("What we learned", bullets, "No new observations.")
