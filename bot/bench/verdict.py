"""Verdicts: is configuration B (candidate) better, worse or the same as A (reference)?

Per guarded metric at each concurrency level (a *cell*), the change B/A - 1 with a Welch t
interval on log values (`stats.log_ratio_interval`), then, with `d` the minimum effect (3 %):

* **regressed**: the interval lies wholly on the bad side of 0 *and* the estimate is at least d bad;
* **improved**: the same on the good side;
* **no effect**: the whole interval lies inside (-d, +d): an equivalence claim (TOST), not merely
  "not significant" (a wide interval around 0 is *undecided*, which is what "within noise" by eye
  usually was);
* **undecided**: anything else; `next_action` says how many more repeats the plan allows.

The error budget: alpha = 1 - confidence per side, spent over the planned looks
(`stats.LookPlan`) and split evenly (Bonferroni) over the guarded cells, so the chance that
*any* cell falsely reads "regressed" over all looks is at most alpha. Capacity values are not
statistics: `max_running_requests` must match exactly, the others within a tolerance.
The overall verdict is the worst: any regression, else anything undecided, else improved if
something improved, else no effect; `guarded_by` names the cell that decided it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from bot.bench.capacity import CapacityVerdict, judge_capacity, parse_tolerance
from bot.bench.samples import MeasurementLike, Side, level_key, level_of
from bot.bench.stats import LookPlan, RepeatStats, Spending, log_ratio_interval, repeat_stats
from bot.config.verdicts import DEFAULT_CAPACITY, DEFAULT_GUARDED, Verdicts

__all__ = [
    "CapacityVerdict",
    "ComparisonResult",
    "MeasurementLike",
    "MetricVerdict",
    "PlannedRun",
    "Side",
    "VerdictSettings",
    "compare",
    "judge",
    "level_of",
    "plan_runs",
]

Verdict = Literal["improved", "regressed", "no effect", "undecided"]
Better = Literal["higher", "lower"]
_RANK: dict[str, int] = {"regressed": 0, "undecided": 1, "improved": 2, "no effect": 3}


@dataclass(frozen=True)
class VerdictSettings:
    """The `[verdicts]` section as fractions (0.03, not 3 %); stored with every Comparison."""

    min_effect: float = 0.03
    confidence: float = 0.95
    min_repeats: int = 3
    max_repeats: int = 10
    looks: int = 3
    spending: Spending = "obrien-fleming"
    power: float = 0.9
    power_against: float = 0.05
    guarded: Mapping[str, Better] = field(default_factory=lambda: dict(DEFAULT_GUARDED))
    min_effect_for: Mapping[str, float] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_CAPACITY))

    @classmethod
    def from_config(cls, section: Verdicts) -> VerdictSettings:
        return cls(
            min_effect=section.min_effect / 100.0,
            confidence=section.confidence / 100.0,
            min_repeats=section.min_repeats,
            max_repeats=section.max_repeats,
            looks=section.looks,
            spending=section.spending,
            power=section.power / 100.0,
            power_against=section.power_against / 100.0,
            guarded=dict(section.guarded),
            min_effect_for={k: v / 100.0 for k, v in section.min_effect_for.items()},
            capacity=dict(section.capacity),
        )

    @property
    def alpha(self) -> float:
        """The one-sided error of each verdict: 5 % for 95 % confidence."""
        return 1.0 - self.confidence

    def plan(self) -> LookPlan:
        return LookPlan.evenly(self.min_repeats, self.max_repeats, self.looks, self.alpha, self.spending)

    def effect_for(self, metric: str) -> float:
        return self.min_effect_for.get(metric, self.min_effect)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: dict(v) if isinstance(v, Mapping) else v for k, v in data.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VerdictSettings:
        return cls(**dict(data))


@dataclass(frozen=True)
class MetricVerdict:
    """One guarded metric at one level: the change with its interval and what it means."""

    metric: str
    level: str
    better: Better
    verdict: Verdict
    change: float | None
    low: float | None
    high: float | None
    min_effect: float
    alpha: float
    reference: RepeatStats
    candidate: RepeatStats
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.metric}@{self.level}"

    def badness(self) -> float:
        """How far the estimate (or, undecided, the interval's far end) lies on the bad side."""
        sign = -1.0 if self.better == "higher" else 1.0
        if self.verdict == "undecided" and self.low is not None and self.high is not None:
            return max(sign * self.low, sign * self.high)
        return sign * (self.change or 0.0)

    def describe(self) -> str:
        if self.change is None or self.low is None or self.high is None:
            return f"{self.name}: {self.verdict} ({self.note})"
        text = f"{self.name}: {self.change:+.1%} [{self.low:+.1%}, {self.high:+.1%}] {self.verdict}"
        return f"{text} ({self.note})" if self.note else text

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["reference"], data["candidate"] = self.reference.to_json(), self.candidate.to_json()
        data["name"] = self.name
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MetricVerdict:
        fields = {k: v for k, v in data.items() if k != "name"}
        fields["reference"] = RepeatStats.from_json(fields["reference"])
        fields["candidate"] = RepeatStats.from_json(fields["candidate"])
        return cls(**fields)


def judge(change: float, low: float, high: float, *, better: Better, min_effect: float) -> Verdict:
    """The four-way rule of the module doc, for a change and its interval (fractions)."""
    sign = 1.0 if better == "higher" else -1.0
    good, good_low, good_high = sign * change, min(sign * low, sign * high), max(sign * low, sign * high)
    if good_high < 0.0 and good <= -min_effect:
        return "regressed"
    if good_low > 0.0 and good >= min_effect:
        return "improved"
    if -min_effect < low and high < min_effect:
        return "no effect"
    return "undecided"


@dataclass(frozen=True)
class ComparisonResult:
    """Everything a Comparison row stores: overall verdict, which cell decided it, all cells."""

    verdict: Verdict
    guarded_by: str | None
    cells: tuple[MetricVerdict, ...]
    capacity: tuple[CapacityVerdict, ...]
    repeats: int
    look: int
    looks: tuple[int, ...]
    next_action: str | None = None
    more_repeats: int | None = None
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """Plain-text evidence, worst first, for the console and Slack renderers."""
        head = f"verdict: {self.verdict}" + (f" (guarded by {self.guarded_by})" if self.guarded_by else "")
        head += f"; {self.repeats} repeats a side, look {self.look} of {len(self.looks)}"
        out = [head]
        out += [c.describe() for c in self.capacity]
        out += [c.describe() for c in sorted(self.cells, key=lambda c: (_RANK[c.verdict], c.name))]
        if self.next_action:
            out.append(f"next: {self.next_action}")
        return out + list(self.notes)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "guarded_by": self.guarded_by,
            "cells": [c.to_json() for c in self.cells],
            "capacity": [c.to_json() for c in self.capacity],
            "repeats": self.repeats,
            "look": self.look,
            "looks": list(self.looks),
            "next_action": self.next_action,
            "more_repeats": self.more_repeats,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ComparisonResult:
        return cls(
            verdict=data["verdict"],
            guarded_by=data["guarded_by"],
            cells=tuple(MetricVerdict.from_json(c) for c in data["cells"]),
            capacity=tuple(CapacityVerdict.from_json(c) for c in data["capacity"]),
            repeats=data["repeats"],
            look=data["look"],
            looks=tuple(data["looks"]),
            next_action=data.get("next_action"),
            more_repeats=data.get("more_repeats"),
            notes=tuple(data.get("notes", ())),
        )


def _cell(
    metric: str, level: str, a: Side, b: Side, settings: VerdictSettings, alpha: float
) -> MetricVerdict:
    better = settings.guarded[metric]
    effect = settings.effect_for(metric)
    xa, xb = a.values(level, metric), b.values(level, metric)
    confidence = 1.0 - 2.0 * alpha
    sa, sb = repeat_stats(xa, confidence=confidence), repeat_stats(xb, confidence=confidence)

    def undecided(note: str) -> MetricVerdict:
        return MetricVerdict(
            metric, level, better, "undecided", None, None, None, effect, alpha, sa, sb, note
        )

    if level in a.client_bound_levels or level in b.client_bound_levels:
        return undecided("client-bound: the load generator, not the server, was the limit")
    if sa.n < 2 or sb.n < 2:
        return undecided(f"{sa.n} and {sb.n} usable repeats; an interval needs 2 a side")
    try:
        ratio = log_ratio_interval(xa, xb, alpha=alpha)
    except ValueError as exc:
        return undecided(str(exc))
    verdict = judge(ratio.change, ratio.low, ratio.high, better=better, min_effect=effect)
    return MetricVerdict(
        metric, level, better, verdict, ratio.change, ratio.low, ratio.high, effect, alpha, sa, sb
    )


def compare(
    reference: Side,
    candidate: Side,
    settings: VerdictSettings | None = None,
    *,
    single_look: bool = False,
    looks_on: Literal["both", "candidate"] = "both",
) -> ComparisonResult:
    """Judge candidate against reference (see the module doc).

    `single_look=True` spends the whole alpha on this one comparison: only for a comparison
    that will never be followed by more repeats and another look. `looks_on="candidate"` counts
    the looks on the candidate's repeats alone (a try: the reference was sized before the restart
    and can no longer grow; `more_repeats` are then the candidate's).
    """
    settings = settings or VerdictSettings()
    plan = settings.plan()
    n = candidate.repeats() if looks_on == "candidate" else min(reference.repeats(), candidate.repeats())
    levels = sorted(set(reference.levels) & set(candidate.levels), key=level_key)
    notes: list[str] = []
    only = sorted(set(reference.levels) ^ set(candidate.levels), key=level_key)
    if only:
        notes.append(f"levels measured on one side only, not compared: {', '.join(only)}")
    pairs = [(m, lv) for lv in levels for m in settings.guarded if _measured(m, lv, reference, candidate)]
    missing = sorted({m for m in settings.guarded for lv in levels} - {m for m, _ in pairs})
    if missing:
        notes.append(f"guarded but not measured: {', '.join(missing)}")
    bound = reference.client_bound_levels | candidate.client_bound_levels
    budget = settings.alpha if single_look else plan.alpha_at(n)
    alpha = budget / max(1, sum(1 for _, lv in pairs if lv not in bound))
    cells = tuple(_cell(m, lv, reference, candidate, settings, alpha) for m, lv in pairs)
    capacity = tuple(
        judge_capacity(name, reference.capacity.get(name), candidate.capacity.get(name), parse_tolerance(tol))
        for name, tol in settings.capacity.items()
        if reference.capacity.get(name) is not None or candidate.capacity.get(name) is not None
    )
    verdict, guarded_by = _overall(cells, capacity)
    if not cells and not capacity:
        notes.append("nothing guarded was measured on both sides")
    capacity_open = any(c.verdict == "undecided" for c in capacity)
    next_action, more = _next_action(verdict, cells, capacity_open, n, plan, single_look)
    if looks_on == "candidate" and next_action is not None:
        next_action = next_action.replace("repeats a side", "repeats of the candidate").replace(
            "repeat a side", "repeat of the candidate"
        )
    return ComparisonResult(
        verdict,
        guarded_by,
        cells,
        capacity,
        n,
        1 if single_look else plan.index(n),
        (n,) if single_look else plan.looks,
        next_action,
        more,
        tuple(notes),
    )


def _measured(metric: str, level: str, a: Side, b: Side) -> bool:
    return any(v is not None for v in a.values(level, metric)) or any(
        v is not None for v in b.values(level, metric)
    )


def _overall(
    cells: Sequence[MetricVerdict], capacity: Sequence[CapacityVerdict]
) -> tuple[Verdict, str | None]:
    """The worst verdict and the cell that carries it (the furthest on the bad side, or the best
    improvement, or for "no effect" the interval closest to its margin). A regressed capacity value
    carries a regression before any statistical cell: it is an exact fact of the two starts, not an
    estimate, so the reader is told the same cause however noisy the benchmark ran."""
    judged: list[tuple[Verdict, str, float]] = [(c.verdict, c.name, c.badness()) for c in cells]
    judged += [(c.verdict, c.metric, c.badness()) for c in capacity]
    if not judged:
        return "undecided", None
    capacity_regressed = [c for c in capacity if c.verdict == "regressed"]
    if capacity_regressed:
        return "regressed", max(capacity_regressed, key=lambda c: c.badness()).metric
    for verdict in ("regressed", "undecided"):
        hits = [j for j in judged if j[0] == verdict]
        if hits:
            return verdict, max(hits, key=lambda j: j[2])[1]
    improved = [j for j in judged if j[0] == "improved"]
    if improved:
        return "improved", min(improved, key=lambda j: j[2])[1]
    closest = max(cells, key=_margin_used, default=None)
    return "no effect", closest.name if closest else judged[0][1]


def _margin_used(cell: MetricVerdict) -> float:
    if cell.low is None or cell.high is None:
        return math.inf
    return max(abs(cell.low), abs(cell.high)) / cell.min_effect


def _next_action(
    verdict: Verdict,
    cells: Sequence[MetricVerdict],
    capacity_open: bool,
    n: int,
    plan: LookPlan,
    single_look: bool,
) -> tuple[str | None, int | None]:
    """What to do about an undecided verdict, and how many more repeats a side (None: more
    repeats will not help, or the cap is reached)."""
    if verdict != "undecided":
        return None, None
    open_cells = [c for c in cells if c.verdict == "undecided"]
    if open_cells and all(c.note.startswith("client-bound") for c in open_cells):
        levels = ", ".join(sorted({c.level for c in open_cells}, key=level_key))
        return (
            f"the client was the limit at {levels}: more repeats will not help; add client workers "
            "or lower the concurrency"
        ), None
    if not open_cells:
        if capacity_open:
            return "a capacity value is missing on one side: capture a snapshot of both starts", None
        return "nothing guarded was measured on both sides: benchmark both at the same levels", None
    target = None if single_look else plan.next_look(n)
    if target is None:
        widest = max(open_cells, key=_margin_used)
        return (
            f"still undecided at {n} repeats a side (the cap is {plan.cap}): {widest.name} cannot be resolved "
            f"to ±{widest.min_effect:.0%} at this noise; raise max_repeats or reduce the noise",
            None,
        )
    more = target - n
    return (
        f"run {more} more repeat{'s' if more != 1 else ''} a side, then compare again (look "
        f"{plan.index(target)} of {len(plan.looks)})",
        more,
    )


@dataclass(frozen=True)
class PlannedRun:
    """One benchmark run of the interleaved plan: which side, and its repeat number (0-based)."""

    side: Literal["A", "B"]
    repeat: int


def plan_runs(n: int, *, start: int = 0, first: Literal["A", "B"] = "A") -> list[PlannedRun]:
    """n repeats a side in ABBA order: A B, B A, A B, ... (repeat `start` onwards).

    Alternating the order of each pair cancels a linear drift (thermal, caches, a neighbour's
    load) between the sides, and consecutive runs of the same side (B B, A A) need no restart
    between them, so a pair costs one configuration switch. Continuing with `start=n` extends
    the same pattern when the verdict asks for more repeats.
    """
    other: Literal["A", "B"] = "B" if first == "A" else "A"
    runs: list[PlannedRun] = []
    for repeat in range(start, start + n):
        order = (first, other) if repeat % 2 == 0 else (other, first)
        runs += [PlannedRun(side, repeat) for side in order]
    return runs
