"""How many repeats a try needs, and the power a comparison actually had.

A try compares a start *before* a change with the start *after* it. The before side cannot be
extended once the server has restarted (the start it measured is gone), so it is sized while it
still runs: from its own observed noise, enough repeats that, with the after side at the cap, a
real change of `power_against` (5 %) would be called with probability `power` (90 %), up to the
cap (`size_reference`). The after side is then extended sequentially, look by look on its own
repeat count, until the verdict decides or the cap is reached (`bot.bench.verdict.compare` with
`looks_on="candidate"`). `power_reached` states the power the final comparison had against that
change, at the repeats each side really had and the error budget the look really used.

The power of one cell (a guarded metric at a level) follows the verdict's rule: "regressed" needs
the estimate at least `min_effect` bad *and* the one-sided interval wholly on the bad side, i.e.
the log ratio beyond both `log(1 - d)` and `q * se`; with run-to-run noise sd (of the log
values, about the CV) and n_a, n_b repeats, the estimate is normal with sd
`se = sd * sqrt(1/n_a + 1/n_b)` and q is Student's t at the cell's alpha (Welch's degrees of
freedom). The noise seen in 3 repeats is itself uncertain (a sample sd from 2 degrees of freedom
is below the true one half the time), so sizing plans for an upper confidence bound of the noise
(`NOISE_BOUND`), not the estimate; `bench/verdict_power.py` measures the whole procedure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bot.bench.samples import Side, level_key
from bot.bench.stats import chi2_quantile, normal_cdf, t_quantile
from bot.bench.verdict import Better, ComparisonResult, VerdictSettings

__all__ = ["NOISE_BOUND", "PowerReached", "Sizing", "cell_noise", "power", "power_reached", "size_reference"]

NOISE_BOUND = 0.8
"""Sizing plans for the noise's one-sided 80 % upper confidence bound (chi-square on n - 1 degrees
of freedom): 3 repeats at 1 % noise still size to 3, 3 repeats at 3 % size to the cap."""


def cell_noise(side: Side, settings: VerdictSettings) -> dict[str, tuple[str, float, int]]:
    """Per guarded cell (`metric@level`, levels not client-bound): (metric, sd of the log values, n)."""
    out: dict[str, tuple[str, float, int]] = {}
    for level in sorted(side.levels, key=level_key):
        if level in side.client_bound_levels:
            continue
        for metric in settings.guarded:
            values = [v for v in side.values(level, metric) if v is not None and v > 0 and math.isfinite(v)]
            if len(values) >= 2:
                out[f"{metric}@{level}"] = (metric, float(np.log(values).std(ddof=1)), len(values))
    return out


def power(
    sd: float,
    n_reference: int,
    n_candidate: int,
    *,
    effect: float,
    min_effect: float,
    alpha: float,
    better: Better,
) -> float:
    """Probability that a real regression of `effect` (a fraction) is called "regressed" (module doc)."""
    if n_reference < 2 or n_candidate < 2:
        return 0.0
    bad = math.log1p(-effect) if better == "higher" else math.log1p(effect)
    margin = abs(math.log1p(-min_effect) if better == "higher" else math.log1p(min_effect))
    if sd <= 0.0:
        return 1.0 if abs(bad) >= margin else 0.0
    va, vb = sd * sd / n_reference, sd * sd / n_candidate
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (n_reference - 1) + vb**2 / (n_candidate - 1))
    q = t_quantile(1.0 - alpha, df)
    return normal_cdf((abs(bad) - max(margin, q * se)) / se)


@dataclass(frozen=True)
class Sizing:
    """How many repeats the before side needs in all, and why."""

    repeats: int
    measured: int
    cell: str | None
    noise: float | None
    planned_power: float | None
    reason: str

    @property
    def more(self) -> int:
        return max(0, self.repeats - self.measured)

    def to_json(self) -> dict[str, object]:
        return {
            "repeats": self.repeats,
            "measured": self.measured,
            "cell": self.cell,
            "noise": self.noise,
            "planned_power": self.planned_power,
            "reason": self.reason,
        }


def _cell_alpha(settings: VerdictSettings, cells: int, n_candidate: int) -> float:
    return settings.plan().alpha_at(n_candidate) / max(1, cells)


def size_reference(side: Side, settings: VerdictSettings) -> Sizing:
    """The repeats the before side needs (at least what it has, at most `max_repeats`), sized for
    the noisiest guarded cell's upper noise bound with the after side at the cap (module doc)."""
    measured = side.repeats()
    cap = settings.max_repeats
    noise = cell_noise(side, settings)
    if not noise:
        return Sizing(
            max(measured, min(settings.min_repeats, cap)),
            measured,
            None,
            None,
            None,
            "no guarded metric with two repeats to size from",
        )
    alpha = _cell_alpha(settings, len(noise), cap)
    sized: list[tuple[int, float, str]] = []
    for name, (metric, sd, n) in noise.items():
        bound = sd * math.sqrt((n - 1) / chi2_quantile(1.0 - NOISE_BOUND, n - 1))
        effect, margin, better = settings.power_against, settings.effect_for(metric), settings.guarded[metric]

        def planned(
            k: int,
            bound: float = bound,
            effect: float = effect,
            margin: float = margin,
            better: Better = better,
        ) -> float:
            return power(bound, k, cap, effect=effect, min_effect=margin, alpha=alpha, better=better)

        n_cell = next((k for k in range(max(measured, 2), cap + 1) if planned(k) >= settings.power), cap)
        n_cell = max(n_cell, measured)
        sized.append((n_cell, -planned(n_cell), name))
    n_worst, minus_power, worst = max(sized)
    need, worst_power = max(measured, n_worst), -minus_power
    sd_worst = noise[worst][1]
    reached = "reaches" if worst_power >= settings.power else "falls short of"
    reason = (
        f"noisiest cell {worst} at {sd_worst:.1%} noise ({measured} repeats): {need} repeats before and "
        f"{cap} after {reached} {settings.power:.0%} power against a {settings.power_against:.0%} change"
    )
    return Sizing(need, measured, worst, sd_worst, worst_power, reason)


@dataclass(frozen=True)
class PowerReached:
    """The power the final comparison had against `effect`, at its weakest cell."""

    power: float | None
    effect: float
    reference_repeats: int
    candidate_repeats: int
    cell: str | None

    def describe(self) -> str:
        sides = f"before {self.reference_repeats} repeats, after {self.candidate_repeats}"
        if self.power is None:
            return (
                f"power against a {self.effect:.0%} change: not measurable ({sides}; no guarded cell judged)"
            )
        return (
            f"power against a {self.effect:.0%} change: {self.power:.0%} ({sides}; weakest cell {self.cell})"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "power": self.power,
            "effect": self.effect,
            "reference_repeats": self.reference_repeats,
            "candidate_repeats": self.candidate_repeats,
            "cell": self.cell,
        }


def power_reached(
    reference: Side, candidate: Side, result: ComparisonResult, settings: VerdictSettings
) -> PowerReached:
    """Per judged cell, the power against `power_against` at the repeats it had, from the noise
    both sides showed (pooled) and the alpha its look used; the weakest cell is reported."""
    a, b = cell_noise(reference, settings), cell_noise(candidate, settings)
    weakest: tuple[float, str] | None = None
    for cell in result.cells:
        if cell.change is None or cell.name not in a or cell.name not in b:
            continue
        (_, sa, na), (_, sb, nb) = a[cell.name], b[cell.name]
        pooled = math.sqrt(((na - 1) * sa * sa + (nb - 1) * sb * sb) / (na + nb - 2))
        value = power(
            pooled,
            na,
            nb,
            effect=settings.power_against,
            min_effect=cell.min_effect,
            alpha=cell.alpha,
            better=cell.better,
        )
        if weakest is None or value < weakest[0]:
            weakest = (value, cell.name)
    return PowerReached(
        weakest[0] if weakest else None,
        settings.power_against,
        reference.repeats(),
        candidate.repeats(),
        weakest[1] if weakest else None,
    )
