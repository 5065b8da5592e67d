"""Capacity values compared without statistics: they are facts of one start, not noisy samples.

`max_running_requests` is an integer SGLang derives from memory; a start either has 48 slots or
26, so any difference is a change (the seeds' 48 -> 26 regression was invisible in throughput at
concurrency 64 because the curve had saturated). `max_total_num_tokens` and the free memory left
after startup move a little on every restart (the free memory measured at start jitters), so
they are judged within a tolerance: `exact`, a percentage of the reference, or an absolute
amount in the value's own unit (`0.5` GB). More is better for all three: fewer slots or tokens
serve less, and less free memory leaves less headroom.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["CapacityVerdict", "Tolerance", "judge_capacity", "parse_tolerance"]

CapacityOutcome = Literal["improved", "regressed", "no effect", "undecided"]


@dataclass(frozen=True)
class Tolerance:
    kind: Literal["exact", "relative", "absolute"]
    value: float = 0.0

    def __str__(self) -> str:
        if self.kind == "exact":
            return "exact"
        return f"{self.value * 100:g}%" if self.kind == "relative" else f"{self.value:g}"

    def allows(self, reference: float, candidate: float) -> bool:
        difference = abs(candidate - reference)
        if self.kind == "exact":
            return difference == 0
        if self.kind == "relative":
            return difference <= self.value * abs(reference)
        return difference <= self.value


def parse_tolerance(text: str) -> Tolerance:
    """`exact`, `2%` or `0.5`, as the `[verdicts.capacity]` table writes them."""
    text = text.strip()
    if text in ("exact", "0", "0.0"):
        return Tolerance("exact")
    if text.endswith("%"):
        return Tolerance("relative", float(text[:-1]) / 100.0)
    return Tolerance("absolute", float(text))


@dataclass(frozen=True)
class CapacityVerdict:
    """One capacity value before and after; `changed` is any difference at all."""

    metric: str
    reference: float | None
    candidate: float | None
    tolerance: str
    verdict: CapacityOutcome
    changed: bool
    change: float | None

    def badness(self) -> float:
        return -(self.change or 0.0) if self.verdict != "undecided" else float("inf")

    def describe(self) -> str:
        if self.reference is None or self.candidate is None:
            return f"{self.metric}: {_show(self.reference)} -> {_show(self.candidate)}: undecided (missing on one side)"
        relative = f" ({self.change:+.1%})" if self.change is not None else ""
        return (
            f"{self.metric}: {_show(self.reference)} -> {_show(self.candidate)}{relative} "
            f"{self.verdict} (tolerance {self.tolerance})"
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CapacityVerdict:
        return cls(**dict(data))


def _show(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def judge_capacity(
    metric: str, reference: object, candidate: object, tolerance: Tolerance
) -> CapacityVerdict:
    """Within tolerance: no effect; otherwise improved or regressed (more is better)."""
    a, b = _number(reference), _number(candidate)
    if a is None or b is None:
        return CapacityVerdict(metric, a, b, str(tolerance), "undecided", a != b, None)
    change = (b - a) / abs(a) if a != 0 else None
    if tolerance.allows(a, b):
        return CapacityVerdict(metric, a, b, str(tolerance), "no effect", a != b, change)
    return CapacityVerdict(metric, a, b, str(tolerance), "improved" if b > a else "regressed", True, change)
