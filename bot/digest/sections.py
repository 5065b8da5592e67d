"""One week's digest cut into the part each channel gets, without reading the store again.

Why a cut and not a build per channel: the weekly job posts to `schedules.digest_channel` and to
every target's own `channel`; building the digest reads the week's experiments, hypotheses,
snapshots and checks, and ten channels must not mean ten scans of the same week. The digest of
every target is built once; each channel's part keeps the lines of its targets only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from bot.digest.model import ChartData, Digest

TargetFilter = Callable[[str], bool]


def digest_section(digest: Digest, keep: TargetFilter, *, scope: str | None) -> Digest:
    """The part of `digest` about the targets `keep` accepts; `scope` names them in the title
    (`Weekly post-mortem 2026-W48 on sglang-qwen`), None for the part without a name."""
    experiments = [line for line in digest.experiments if keep(line.target)]
    not_started = [line for line in digest.not_started if keep(line.target)]
    marked = {f"#{line.id}" for line in (*experiments, *not_started)}  # a chart mark is labelled `#id`
    chart = digest.chart
    return replace(
        digest,
        target=scope,
        experiments=experiments,
        not_started=not_started,
        confirmed=[h for h in digest.confirmed if keep(h.target)],
        refuted=[h for h in digest.refuted if keep(h.target)],
        inconclusive=[h for h in digest.inconclusive if keep(h.target)],
        still_open=[h for h in digest.still_open if keep(h.target)],
        kept=[d for d in digest.kept if keep(d.target)],
        reverted=[d for d in digest.reverted if keep(d.target)],
        targets=[t for t in digest.targets if keep(t.target)],
        failed_starts=[i for i in digest.failed_starts if keep(i.target)],
        rollbacks=[i for i in digest.rollbacks if keep(i.target)],
        checks=None if digest.checks is None else [c for c in digest.checks if keep(c.target)],
        learned=[o for o in digest.learned if keep(o.target)],
        predictions=[p for p in digest.predictions if keep(p.target)],
        chart=ChartData(
            capacity={name: points for name, points in chart.capacity.items() if keep(name)},
            throughput={name: points for name, points in chart.throughput.items() if keep(name)},
            marks=[mark for mark in chart.marks if mark[1] in marked],
            reference={name: value for name, value in chart.reference.items() if keep(name)},
        ),
    )
