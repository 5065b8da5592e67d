"""The digest's phrases, shared by the Markdown and the Block Kit renderers (raw text, unescaped).

Why shared: "3 experiments (1 improved, 1 regressed)" and "max_running_requests 48 → 26" must
read the same in the wiki and in Slack; each renderer escapes for its own format.
"""

from __future__ import annotations

from datetime import datetime

from bot.digest.model import Digest, ExperimentLine
from bot.digest.week import zone

__all__ = ["capacity_change", "decision", "glance", "local_time", "nothing_happened", "plural", "verdict"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def local_time(digest: Digest, moment: datetime | None) -> str:
    """`Tue 24 Nov 14:05` on the team's clock."""
    if moment is None:
        return "-"
    return moment.astimezone(zone(digest.timezone)).strftime("%a %d %b %H:%M")


def verdict(line: ExperimentLine) -> str:
    """The verdict, or the status when the run reached none (`failed`, `interrupted`)."""
    if line.verdict and line.status not in ("succeeded",):
        return f"{line.verdict} ({line.status})"
    return line.verdict or line.status


def capacity_change(before: object, after: object) -> str:
    """`48 → 26`, `48` (unchanged), or `-`."""
    if before is None and after is None:
        return "-"
    if before is None or after is None or before == after:
        return str(after if after is not None else before)
    return f"{before} → {after}"


def decision(line: ExperimentLine) -> str:
    if line.kept is None:
        return "-"
    return "kept" if line.kept else "reverted"


def glance(digest: Digest) -> str:
    """One sentence of counts: experiments by verdict, hypotheses, flags, incidents, checks, lessons."""
    by = ", ".join(
        f"{count} {name}" for name, count in sorted(digest.verdicts.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    parts = [plural(len(digest.experiments), "experiment") + (f" ({by})" if by else "")]
    if digest.not_started:
        parts.append(f"{len(digest.not_started)} not started (could not connect)")
    parts.append(
        f"hypotheses: {len(digest.confirmed)} confirmed, {len(digest.refuted)} refuted, "
        f"{len(digest.inconclusive)} inconclusive, {len(digest.still_open)} still open"
    )
    parts.append(f"flags: {len(digest.kept)} kept, {len(digest.reverted)} reverted")
    parts.append(
        f"{plural(len(digest.failed_starts), 'failed start')}, {plural(len(digest.rollbacks), 'rollback')}"
    )
    parts.append(
        "checks: not recorded" if digest.checks is None else plural(len(digest.checks), "failed check")
    )
    parts.append(plural(len(digest.learned), "observation") + " learned")
    return "; ".join(parts)


def nothing_happened(digest: Digest) -> str:
    scope = f" on {digest.target}" if digest.target else ""
    return (
        f"Nothing happened in {digest.week}{scope}: no experiments, no hypotheses resolved, "
        "no failed checks, nothing learned."
    )
