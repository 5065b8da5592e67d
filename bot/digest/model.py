"""The digest as plain data: what happened in one week, section by section.

Why data first: the same digest is posted to Slack (Block Kit and a chart), written as Markdown
for a wiki or an e-mail, and printed as JSON for scripts; the renderers only lay it out, so
the three never disagree on a count or a name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from bot.digest.week import IsoWeek

__all__ = [
    "ChartData",
    "CheckLine",
    "Digest",
    "ExperimentLine",
    "FlagDecision",
    "HypothesisLine",
    "Incident",
    "Learned",
    "TargetFlags",
    "ThreadLink",
]


@dataclass(frozen=True)
class ThreadLink:
    """Where a run was discussed in Slack; `permalink` when the reporter could ask Slack for it."""

    channel: str
    ts: str
    permalink: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"channel": self.channel, "ts": self.ts, "permalink": self.permalink}


@dataclass(frozen=True)
class ExperimentLine:
    """One experiment of the week: what it tried, how it ended, and where its thread is."""

    id: int
    target: str
    playbook: str
    what: str
    status: str
    verdict: str | None
    summary: str | None
    actor: str
    at: datetime
    kept: bool | None = None
    capacity_before: Any = None
    capacity_after: Any = None
    thread: ThreadLink | None = None
    not_started: str | None = None
    """Why the run never reached a node (`RunState.conclusion.not_started`); None for a run that did."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "target": self.target,
            "playbook": self.playbook,
            "what": self.what,
            "status": self.status,
            "verdict": self.verdict,
            "summary": self.summary,
            "actor": self.actor,
            "at": self.at.isoformat(),
            "kept": self.kept,
            "max_running_requests": {"before": self.capacity_before, "after": self.capacity_after},
            "thread": self.thread.to_json() if self.thread else None,
            "not_started": self.not_started,
        }


@dataclass(frozen=True)
class HypothesisLine:
    id: int
    target: str
    statement: str
    status: str
    because: str | None
    at: datetime
    """When it was resolved (or created, for one still open)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "target": self.target,
            "statement": self.statement,
            "status": self.status,
            "because": self.because,
            "at": self.at.isoformat(),
        }


@dataclass(frozen=True)
class FlagDecision:
    """A change kept on the target, or taken back (by `decide` after a try, or by a revert)."""

    experiment_id: int
    target: str
    change: str
    decision: str
    """`kept` or `reverted`."""
    why: str

    def to_json(self) -> dict[str, Any]:
        return {
            "experiment_id": self.experiment_id,
            "target": self.target,
            "change": self.change,
            "decision": self.decision,
            "why": self.why,
        }


@dataclass(frozen=True)
class TargetFlags:
    """A target's flags at the end of the week against its baseline (as pinned by then)."""

    target: str
    baseline_id: int | None
    baseline_snapshot_id: int | None
    snapshot_id: int | None
    differences: tuple[str, ...]
    baseline_capacity: Any = None
    capacity: Any = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "baseline_id": self.baseline_id,
            "baseline_snapshot_id": self.baseline_snapshot_id,
            "snapshot_id": self.snapshot_id,
            "differences": list(self.differences),
            "max_running_requests": {"baseline": self.baseline_capacity, "current": self.capacity},
            "note": self.note,
        }


@dataclass(frozen=True)
class Incident:
    """A start that failed, or a rollback to the flags from before."""

    experiment_id: int
    target: str
    kind: str
    """`failed start` or `rollback`."""
    text: str
    at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "experiment_id": self.experiment_id,
            "target": self.target,
            "kind": self.kind,
            "text": self.text,
            "at": self.at.isoformat(),
        }


@dataclass(frozen=True)
class CheckLine:
    """A scheduled verification check that failed (read from `bot.store.checks`)."""

    target: str
    name: str
    text: str
    at: datetime | None
    experiment_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "name": self.name,
            "text": self.text,
            "at": self.at.isoformat() if self.at else None,
            "experiment_id": self.experiment_id,
        }


@dataclass(frozen=True)
class PredictionLine:
    """A try's capacity prediction next to what its start measured (the prediction error over the
    week); `missed`: the start fell outside the predicted band (also a finding under "learned")."""

    experiment_id: int
    target: str
    at: datetime
    text: str
    error: int | None
    missed: bool | None

    def to_json(self) -> dict[str, Any]:
        return {
            "experiment_id": self.experiment_id,
            "target": self.target,
            "at": self.at.isoformat(),
            "text": self.text,
            "error": self.error,
            "missed": self.missed,
        }


@dataclass(frozen=True)
class Learned:
    """A knowledge-base observation added during the week."""

    flag: str
    kind: str
    text: str
    target: str
    experiment_id: int | None
    at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "flag": self.flag,
            "kind": self.kind,
            "text": self.text,
            "target": self.target,
            "experiment_id": self.experiment_id,
            "at": self.at.isoformat(),
        }


@dataclass(frozen=True)
class ChartData:
    """Per target: (instant, effective max_running_requests) and (instant, peak output tok/s);
    (instant, label, verdict) of each experiment to mark."""

    capacity: dict[str, list[tuple[datetime, float]]] = field(default_factory=dict)
    throughput: dict[str, list[tuple[datetime, float]]] = field(default_factory=dict)
    marks: list[tuple[datetime, str, str | None]] = field(default_factory=list)
    reference: dict[str, float] = field(default_factory=dict)
    """Per target: the baseline's peak output tok/s (a dashed line to compare the week with)."""

    @property
    def empty(self) -> bool:
        return not any(self.capacity.values()) and not any(self.throughput.values()) and not self.marks

    def to_json(self) -> dict[str, Any]:
        def series(data: dict[str, list[tuple[datetime, float]]]) -> dict[str, Any]:
            return {name: [[at.isoformat(), value] for at, value in points] for name, points in data.items()}

        return {
            "capacity": series(self.capacity),
            "output_throughput": series(self.throughput),
            "marks": [[at.isoformat(), label, verdict] for at, label, verdict in self.marks],
            "baseline_output_throughput": dict(self.reference),
        }


@dataclass(frozen=True)
class Digest:
    """One week's post-mortem. `checks` is None when no check results can be read yet."""

    week: IsoWeek
    timezone: str
    start: datetime
    end: datetime
    target: str | None
    experiments: list[ExperimentLine]
    confirmed: list[HypothesisLine]
    refuted: list[HypothesisLine]
    inconclusive: list[HypothesisLine]
    still_open: list[HypothesisLine]
    kept: list[FlagDecision]
    reverted: list[FlagDecision]
    targets: list[TargetFlags]
    failed_starts: list[Incident]
    rollbacks: list[Incident]
    checks: list[CheckLine] | None
    learned: list[Learned]
    chart: ChartData
    checks_note: str = ""
    not_started: list[ExperimentLine] = field(default_factory=list)
    """Runs that never reached a node (a key, known_hosts, host key or login failure before any
    change): listed apart, not among `experiments` nor in their failure count."""
    predictions: list[PredictionLine] = field(default_factory=list)
    """The week's tries that predicted capacity before their restart, oldest first."""

    @property
    def empty(self) -> bool:
        """Nothing happened: no experiment, no hypothesis resolved, no check failed, nothing learned."""
        return not (
            self.experiments
            or self.not_started
            or self.confirmed
            or self.refuted
            or self.inconclusive
            or self.learned
            or self.checks
        )

    def title(self) -> str:
        scope = f" on {self.target}" if self.target else ""
        return f"Weekly post-mortem {self.week}{scope}"

    def period(self) -> str:
        """`Mon 23 Nov 2026 – Sun 29 Nov 2026 (Europe/Berlin)`."""
        last = self.end.astimezone(self.start.tzinfo).date() - timedelta(days=1)
        return f"{self.start:%a %d %b %Y} – {last:%a %d %b %Y} ({self.timezone})"

    @cached_property
    def verdicts(self) -> Mapping[str, int]:
        """Experiments per verdict (the status of a run that reached none); counted once, since
        the glance, the counts and the Slack summary all need it, and a week can hold 100,000."""
        return Counter(line.verdict or line.status for line in self.experiments)

    def counts(self) -> dict[str, int]:
        return {
            "experiments": len(self.experiments),
            **{f"verdict:{key}": value for key, value in sorted(self.verdicts.items())},
            "not_started": len(self.not_started),
            "confirmed": len(self.confirmed),
            "refuted": len(self.refuted),
            "inconclusive": len(self.inconclusive),
            "still_open": len(self.still_open),
            "kept": len(self.kept),
            "reverted": len(self.reverted),
            "failed_starts": len(self.failed_starts),
            "rollbacks": len(self.rollbacks),
            "failed_checks": len(self.checks or []),
            "learned": len(self.learned),
            "predictions": len(self.predictions),
            "predictions_missed": sum(1 for p in self.predictions if p.missed),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "week": str(self.week),
            "timezone": self.timezone,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "target": self.target,
            "empty": self.empty,
            "counts": self.counts(),
            "experiments": [line.to_json() for line in self.experiments],
            "not_started": [line.to_json() for line in self.not_started],
            "hypotheses": {
                "confirmed": [h.to_json() for h in self.confirmed],
                "refuted": [h.to_json() for h in self.refuted],
                "inconclusive": [h.to_json() for h in self.inconclusive],
                "open": [h.to_json() for h in self.still_open],
            },
            "flags": {
                "kept": [d.to_json() for d in self.kept],
                "reverted": [d.to_json() for d in self.reverted],
                "against_baseline": [t.to_json() for t in self.targets],
            },
            "failed_starts": [i.to_json() for i in self.failed_starts],
            "rollbacks": [i.to_json() for i in self.rollbacks],
            "checks": None if self.checks is None else [c.to_json() for c in self.checks],
            "checks_note": self.checks_note,
            "learned": [item.to_json() for item in self.learned],
            "predictions": [item.to_json() for item in self.predictions],
            "chart": self.chart.to_json(),
        }
