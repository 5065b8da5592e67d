"""Expectations checked against stored measurements: the one way every step evaluates one.

A `Measured` is one side of an evaluation: a stored snapshot (capacity, status, `parsed.*`)
and a stored measurement set (benchmark metrics), with a label naming them ("the start before
this try (snapshot #3 / set #7)"). `evaluate_all` reads each expectation's value from the side
being judged and its reference value from the reference side, then calls
`bot.sglang.expectation.evaluate`, so try, verify, revert, isolate, the scheduled checks and
hypotheses all mean the same thing by `output_throughput>=-5%`.

The reference per command (docs/commands.md, "Expectations"): try and its hypothesis, the start
before the restart; verify, revert and the scheduled checks, the pinned baseline (else the
known-good start, which has no measurement set); isolate, its good reference (the baseline, or
the start before the experiment named by `since=`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.loop.snapshot_values import snapshot_value
from bot.sglang.expectation import Expectation, ExpectationResult, Reference, evaluate
from bot.sglang.metrics import CAPACITY, STATUS
from bot.store import AsyncStore, Snapshot
from bot.store.bench_repo import load_set
from bot.store.snapshots import get_snapshot
from bot.target.evidence import TableBlock


def is_server_metric(metric: str) -> bool:
    """Read from a start (no benchmark needed): capacity, status, printed server_args fields."""
    return metric in CAPACITY or metric in STATUS or metric.startswith("parsed.")


def bench_value(summary: Mapping[str, Any] | None, metric: str) -> float | None:
    """A benchmark metric of a set: the mean at its highest concurrency level, where capacity
    binds; a rate sweep's (levels by `request_rate`, no concurrency) at its highest rate."""
    rows = (summary or {}).get("levels", [])
    levels = [row for row in rows if row.get("concurrency") is not None]
    key = "concurrency"
    if not levels:
        levels = [row for row in rows if isinstance(row.get("request_rate"), int | float)]
        key = "request_rate"
    if not levels:
        return None
    top = max(levels, key=lambda row: row[key])
    value = top.get(metric)
    return float(value) if isinstance(value, int | float) else None


def cite(snapshot_id: int | None, set_id: int | None) -> str:
    """`snapshot #3 / set #7`, `snapshot #3, no measurement set`, or `nothing stored`."""
    parts = []
    if snapshot_id is not None:
        parts.append(f"snapshot #{snapshot_id}")
    if set_id is not None:
        parts.append(f"set #{set_id}")
    if not parts:
        return "nothing stored"
    if set_id is None:
        return parts[0] + ", no measurement set"
    return " / ".join(parts)


@dataclass(frozen=True)
class Measured:
    """One side: a stored snapshot and measurement set (either may be missing), named."""

    name: str
    """What it is, without the ids: "the start before this try", "baseline #2"."""
    snapshot: Snapshot | None = None
    snapshot_id: int | None = None
    set_id: int | None = None
    summary: Mapping[str, Any] | None = None
    missing: str | None = None
    """Why there is no such side at all ("no baseline pinned"), when `name` stands for nothing."""

    @property
    def label(self) -> str:
        if self.missing is not None and self.snapshot_id is None and self.set_id is None:
            return self.name
        return f"{self.name} ({cite(self.snapshot_id, self.set_id)})"

    def value(self, metric: str) -> float | str | None:
        if is_server_metric(metric):
            found = snapshot_value(self.snapshot, metric)
            return found if isinstance(found, int | float | str) else None
        return bench_value(self.summary, metric)

    def reference_for(self, metric: str) -> Reference:
        value = self.value(metric)
        missing = None
        if value is None:
            if self.missing is not None:
                missing = self.missing
            elif is_server_metric(metric):
                missing = "no stored snapshot" if self.snapshot is None else f"its start has no {metric}"
            else:
                missing = "no measurement set" if self.summary is None else f"its set has no {metric}"
        return Reference(value, self.label, missing)


async def load_measured(
    store: AsyncStore, name: str, snapshot_id: int | None, set_id: int | None, *, missing: str | None = None
) -> Measured:
    """A side from the store by ids (a set or snapshot that is gone counts as not stored)."""
    snapshot = await store.run(get_snapshot, store.store, snapshot_id) if snapshot_id is not None else None
    loaded = await store.run(load_set, store.store, set_id) if set_id is not None else None
    return Measured(
        name,
        snapshot,
        snapshot_id if snapshot is not None else None,
        set_id if loaded is not None else None,
        loaded.set.summary if loaded is not None else None,
        missing,
    )


def evaluate_all(
    expectations: Sequence[Expectation], now: Measured, reference: Measured | None
) -> list[ExpectationResult]:
    """Each expectation on `now`, relative ones against `reference` (None: the step has none)."""
    results = []
    for expectation in expectations:
        ref = reference.reference_for(expectation.metric) if reference is not None else None
        results.append(evaluate(expectation, now.value(expectation.metric), ref))
    return results


def _cell(value: float | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def results_table(
    results: Sequence[ExpectationResult], now: Measured, title: str = "Expectations"
) -> TableBlock:
    """The Expectations table: each with what was measured, the reference it used, and the outcome."""
    rows = tuple(
        (
            str(r.expectation),
            _cell(r.actual),
            f"{_cell(r.reference)} ({r.source})" if r.source else "-",
            {"pass": "pass", "fail": "FAIL", "not measured": "not measured"}[r.outcome],
            r.why,
        )
        for r in results
    )
    return TableBlock(
        title,
        ("expectation", "measured", "reference", "result", "why"),
        rows,
        f"measured on {now.label}",
    )
