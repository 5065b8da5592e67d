"""The try's headline names what decided the verdict and never says regressed on its own."""

from __future__ import annotations

from types import SimpleNamespace

from bot.bench.capacity import CapacityVerdict
from bot.loop.steps.measure_steps import _decided_by, _headline
from bot.store import Snapshot

CAPACITY = {"max_running_requests": "exact"}
SNAP = Snapshot(target="lab", node="node0", effective={"max_running_requests": 48})


def result(verdict: str, guard: str | None, *cells: CapacityVerdict) -> SimpleNamespace:
    return SimpleNamespace(verdict=verdict, guarded_by=guard, capacity=cells)


def test_the_capacity_guard_is_named_with_its_numbers() -> None:
    cut = CapacityVerdict("max_running_requests", 48, 26, "exact", "regressed", True, -0.458)
    said = _decided_by(result("regressed", "max_running_requests", cut), CAPACITY)
    assert (
        said
        == "the capacity guard decided (max_running_requests: 48 -> 26 (-45.8%) regressed (tolerance exact))"
    )


def test_the_statistics_are_named_by_the_cell_that_decided() -> None:
    assert _decided_by(result("improved", "output_throughput@64"), CAPACITY) == (
        "the statistics decided (output_throughput@64)"
    )


def test_undecided_statistics_never_read_as_regressed() -> None:
    """The issue's case: capacity 48 -> 48, statistics undecided, no expectation failed."""
    said = _decided_by(result("undecided", "output_throughput@64"), CAPACITY)
    headline = _headline("inconclusive", said, SNAP, SNAP)
    assert headline == (
        "inconclusive: the statistics did not decide (output_throughput@64 undecided); "
        "effective max_running_requests 48 -> 48"
    )
    assert "regressed" not in headline
