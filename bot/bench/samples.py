"""What a comparison reads: one configuration's repeats per level, and its capacity values.

Separate from the verdict so that callers holding results in memory (the bench runner) and stored
sets (`bot.bench.compare_sets.side_of`) build the same thing; levels are named `c=64` (closed loop) or
`rate=8` (open loop), which is also how verdicts name their cells (`output_throughput@c=64`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["MeasurementLike", "Side", "level_key", "level_of"]


class MeasurementLike(Protocol):
    """What a comparison reads of one repeat; `bot.store.models.Measurement` is one."""

    @property
    def concurrency(self) -> int | None: ...
    @property
    def request_rate(self) -> float | None: ...
    @property
    def metrics(self) -> dict[str, Any]: ...
    @property
    def client_bound(self) -> bool: ...


def level_of(concurrency: int | None, request_rate: float | None) -> str:
    """A level's name: `c=64` (closed loop), `rate=8` (open loop), or `all`."""
    if concurrency is not None:
        return f"c={concurrency}"
    if request_rate is not None:
        return f"rate={request_rate:g}"
    return "all"


def level_key(level: str) -> tuple[int, float, str]:
    kind, _, value = level.partition("=")
    try:
        return (0 if kind == "c" else 1, float(value), level)
    except ValueError:
        return (2, 0.0, level)


@dataclass(frozen=True)
class Side:
    """One configuration's repeats: per level, one metrics dict per repeat; and its capacity."""

    levels: Mapping[str, Sequence[Mapping[str, Any]]]
    capacity: Mapping[str, Any] = field(default_factory=dict)
    client_bound_levels: frozenset[str] = frozenset()

    @classmethod
    def from_measurements(
        cls, measurements: Iterable[MeasurementLike], *, capacity: Mapping[str, Any] | None = None
    ) -> Side:
        levels: dict[str, list[Mapping[str, Any]]] = {}
        bound: set[str] = set()
        for m in measurements:
            level = level_of(m.concurrency, m.request_rate)
            levels.setdefault(level, []).append(m.metrics)
            if m.client_bound:
                bound.add(level)
        return cls(levels, dict(capacity or {}), frozenset(bound))

    def values(self, level: str, metric: str) -> list[float | None]:
        out: list[float | None] = []
        for metrics in self.levels.get(level, ()):
            value = metrics.get(metric)
            out.append(
                float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
            )
        return out

    def repeats(self) -> int:
        """Repeats a side as the plan counts them: the fewest any level has."""
        return min((len(runs) for runs in self.levels.values()), default=0)
