"""Verdicts on synthetic repeats with fixed seeds: the seeds' numbers (121 and 1582 tok/s, 48 -> 26)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from bot.bench.capacity import judge_capacity, parse_tolerance
from bot.bench.verdict import (
    ComparisonResult,
    PlannedRun,
    Side,
    VerdictSettings,
    compare,
    judge,
    plan_runs,
)
from bot.config.verdicts import Verdicts

BASE = {"c=1": 121.0, "c=64": 1582.0}
SEED_CAPACITY = {"max_running_requests": 48, "max_total_num_tokens": 1_830_000, "available_gpu_mem_gb": 13.3}


def repeats(
    rng: np.random.Generator, n: int, *, speed: float = 1.0, cv: float = 0.03
) -> dict[str, list[dict[str, float]]]:
    """n repeats per level: throughput = base x speed x noise; TPOT follows it, TTFT has its own noise."""
    levels: dict[str, list[dict[str, float]]] = {}
    for level, base in BASE.items():
        runs = []
        for _ in range(n):
            f = speed * float(np.exp(rng.normal(0.0, cv)))
            runs.append(
                {
                    "output_throughput": base * f,
                    "median_tpot_ms": 1000.0 / (base / (64 if level == "c=64" else 1)) / f,
                    "median_ttft_ms": 180.0 / speed * float(np.exp(rng.normal(0.0, cv))),
                }
            )
        levels[level] = runs
    return levels


def sequential(
    seed: int, *, speed: float, cv: float, settings: VerdictSettings | None = None
) -> tuple[list[ComparisonResult], int]:
    """The runner's loop: compare at the first look, add the repeats asked for, compare again."""
    settings = settings or VerdictSettings()
    rng = np.random.default_rng(seed)
    a, b = repeats(rng, settings.max_repeats, cv=cv), repeats(rng, settings.max_repeats, speed=speed, cv=cv)
    n, results = settings.min_repeats, []
    while True:
        result = compare(
            Side({k: v[:n] for k, v in a.items()}), Side({k: v[:n] for k, v in b.items()}), settings
        )
        results.append(result)
        if result.more_repeats is None:
            return results, n
        n += result.more_repeats


def rate(outcomes: Sequence[str], verdict: str) -> float:
    return outcomes.count(verdict) / len(outcomes)


def test_fifteen_percent_slower_is_regressed() -> None:
    results, n = sequential(1, speed=0.85, cv=0.03)
    final = results[-1]
    assert final.verdict == "regressed"
    assert final.guarded_by is not None and "@c=" in final.guarded_by
    throughput = next(c for c in final.cells if c.name == "output_throughput@c=64")
    assert throughput.verdict == "regressed"
    assert throughput.change == pytest.approx(-0.15, abs=0.04)
    assert throughput.high is not None and throughput.high < 0
    assert final.next_action is None and n <= 10


def test_ten_percent_faster_is_improved() -> None:
    final = sequential(2, speed=1.10, cv=0.02)[0][-1]
    assert final.verdict == "improved"
    assert all(c.verdict == "improved" for c in final.cells)
    assert final.guarded_by is not None


def test_pure_noise_is_never_regressed_beyond_the_documented_rate() -> None:
    """Same distribution, 3 % CV, sequential looks included: false alarms at most 5 % (alpha)."""
    outcomes = [sequential(seed, speed=1.0, cv=0.03)[0][-1].verdict for seed in range(300)]
    assert rate(outcomes, "regressed") <= 0.05
    assert rate(outcomes, "improved") <= 0.05
    assert set(outcomes) <= {"no effect", "undecided", "regressed", "improved"}
    assert rate(outcomes, "no effect") + rate(outcomes, "undecided") >= 0.9


def test_a_quiet_no_change_is_no_effect_and_a_noisy_one_undecided_not_no_effect() -> None:
    quiet = sequential(5, speed=1.0, cv=0.005)[0][-1]
    assert quiet.verdict == "no effect"
    assert all(
        c.low is not None and c.high is not None and -0.03 < c.low < c.high < 0.03 for c in quiet.cells
    )
    rng = np.random.default_rng(6)
    noisy = compare(Side(repeats(rng, 3, cv=0.05)), Side(repeats(rng, 3, cv=0.05)))
    assert noisy.verdict == "undecided"  # "within noise" by eye: an interval far wider than ±3 %
    assert noisy.next_action == "run 3 more repeats a side, then compare again (look 2 of 3)"


def test_capacity_48_to_26_is_regressed_even_when_throughput_is_equal() -> None:
    rng = np.random.default_rng(7)
    a = Side(repeats(rng, 10, cv=0.003), SEED_CAPACITY)
    b = Side(repeats(rng, 10, cv=0.003), {**SEED_CAPACITY, "max_running_requests": 26})
    result = compare(a, b)
    assert {c.verdict for c in result.cells} == {"no effect"}
    assert result.verdict == "regressed"
    assert result.guarded_by == "max_running_requests"
    slots = next(c for c in result.capacity if c.metric == "max_running_requests")
    assert (slots.reference, slots.candidate, slots.changed) == (48, 26, True)
    assert slots.describe() == "max_running_requests: 48 -> 26 (-45.8%) regressed (tolerance exact)"


def test_a_capacity_regression_carries_the_verdict_over_a_worse_statistical_one() -> None:
    """On a loaded machine the benchmark may regress further than the capacity did: the verdict
    still names the exact cause, the capacity value, not the noisier estimate."""
    rng = np.random.default_rng(9)
    a = Side(repeats(rng, 10, cv=0.003), SEED_CAPACITY)
    slowed = repeats(rng, 10, cv=0.003)
    for run in slowed["c=64"]:
        run["median_ttft_ms"] *= 3.0  # far worse than 48 -> 26 on its own scale
    result = compare(a, Side(slowed, {**SEED_CAPACITY, "max_running_requests": 26}))
    assert result.verdict == "regressed"
    assert "median_ttft_ms@c=64" in [c.name for c in result.cells if c.verdict == "regressed"]
    assert result.guarded_by == "max_running_requests"


def test_capacity_tolerances() -> None:
    exact, two, half_gb = parse_tolerance("exact"), parse_tolerance("2%"), parse_tolerance("0.5")
    assert judge_capacity("max_running_requests", 48, 49, exact).verdict == "improved"
    assert judge_capacity("max_total_num_tokens", 1_830_000, 1_800_000, two).verdict == "no effect"
    assert judge_capacity("max_total_num_tokens", 1_830_000, 1_700_000, two).verdict == "regressed"
    jitter = judge_capacity("available_gpu_mem_gb", 13.3, 13.0, half_gb)
    assert (jitter.verdict, jitter.changed) == ("no effect", True)
    assert judge_capacity("available_gpu_mem_gb", 13.3, 10.2, half_gb).verdict == "regressed"
    assert judge_capacity("max_running_requests", 48, None, exact).verdict == "undecided"


def test_overall_verdict_names_the_guarding_metric() -> None:
    rng = np.random.default_rng(8)
    a, b = repeats(rng, 10, cv=0.005), repeats(rng, 10, cv=0.005)
    for run in b["c=64"]:
        run["median_ttft_ms"] *= 1.25  # only the queueing at concurrency 64 got worse
    result = compare(Side(a), Side(b))
    assert result.verdict == "regressed"
    assert result.guarded_by == "median_ttft_ms@c=64"
    assert [c.name for c in result.cells if c.verdict == "regressed"] == ["median_ttft_ms@c=64"]
    assert result.lines()[0] == (
        "verdict: regressed (guarded by median_ttft_ms@c=64); 10 repeats a side, look 3 of 3"
    )


def test_sequential_undecided_then_more_repeats_then_decided() -> None:
    results, n = sequential(11, speed=0.92, cv=0.02)
    first, last = results[0], results[-1]
    assert first.verdict == "undecided"
    assert first.more_repeats == 3 and first.next_action is not None
    assert first.next_action.startswith("run 3 more repeats a side")
    assert last.verdict == "regressed" and n > 3
    assert [r.look for r in results] == list(range(1, len(results) + 1))


def test_undecided_at_the_cap_says_so() -> None:
    settings = VerdictSettings()
    rng = np.random.default_rng(12)
    result = compare(Side(repeats(rng, 10, cv=0.04)), Side(repeats(rng, 10, speed=0.975, cv=0.04)), settings)
    assert result.verdict == "undecided" and result.more_repeats is None
    assert result.next_action is not None and "the cap is 10" in result.next_action


def test_client_bound_levels_are_not_judged() -> None:
    rng = np.random.default_rng(13)
    a = Side(repeats(rng, 10, cv=0.005), client_bound_levels=frozenset({"c=64"}))
    result = compare(a, Side(repeats(rng, 10, cv=0.005)))
    bound = [c for c in result.cells if c.level == "c=64"]
    assert bound and all(c.verdict == "undecided" and c.note.startswith("client-bound") for c in bound)
    assert result.verdict == "undecided" and result.more_repeats is None
    assert result.next_action is not None and "the client was the limit at c=64" in result.next_action


def test_odd_inputs_are_undecided_with_a_reason() -> None:
    a = Side({"c=1": [{"output_throughput": 0.0}, {"output_throughput": 100.0}]})
    b = Side({"c=1": [{"output_throughput": 100.0}, {"output_throughput": 100.0}], "c=8": [{}]})
    result = compare(a, b, VerdictSettings(guarded={"output_throughput": "higher", "p99_itl_ms": "lower"}))
    (cell,) = result.cells
    assert cell.verdict == "undecided" and "positive" in cell.note
    assert "levels measured on one side only, not compared: c=8" in result.notes
    assert "guarded but not measured: p99_itl_ms" in result.notes


def test_single_look_spends_the_whole_alpha() -> None:
    rng = np.random.default_rng(14)
    a, b = Side(repeats(rng, 3, cv=0.01)), Side(repeats(rng, 3, speed=0.85, cv=0.01))
    sequential_cells = compare(a, b).cells
    one_look = compare(a, b, single_look=True)
    assert one_look.cells[0].alpha == pytest.approx(0.05 / 6)
    assert sequential_cells[0].alpha < one_look.cells[0].alpha
    assert one_look.verdict == "regressed" and one_look.next_action is None


@pytest.mark.parametrize(
    ("change", "low", "high", "better", "expected"),
    [
        (-0.05, -0.08, -0.02, "higher", "regressed"),
        (-0.02, -0.04, -0.001, "higher", "undecided"),  # significant, but smaller than the minimum
        (-0.01, -0.025, 0.005, "higher", "no effect"),
        (0.00, -0.04, 0.04, "higher", "undecided"),  # not significant is not the same as no effect
        (0.05, 0.02, 0.08, "lower", "regressed"),  # a latency that went up
        (-0.05, -0.08, -0.02, "lower", "improved"),
    ],
)
def test_the_four_way_rule(change: float, low: float, high: float, better: str, expected: str) -> None:
    assert judge(change, low, high, better=better, min_effect=0.03) == expected  # type: ignore[arg-type]


def test_results_and_settings_round_trip_through_json() -> None:
    rng = np.random.default_rng(15)
    result = compare(Side(repeats(rng, 6), SEED_CAPACITY), Side(repeats(rng, 6), SEED_CAPACITY))
    assert ComparisonResult.from_json(json.loads(json.dumps(result.to_json()))) == result
    settings = VerdictSettings.from_config(
        Verdicts(min_effect="5%", confidence=90, min_effect_for={"median_ttft_ms": 10})
    )
    assert (settings.min_effect, settings.alpha, settings.effect_for("median_ttft_ms")) == pytest.approx(
        (0.05, 0.10, 0.10)
    )
    assert VerdictSettings.from_json(json.loads(json.dumps(settings.to_json()))) == settings


def test_plan_runs_is_abba_and_continues() -> None:
    order: Callable[[list[PlannedRun]], str] = lambda runs: "".join(r.side for r in runs)
    assert order(plan_runs(4)) == "ABBAABBA"
    assert [r.repeat for r in plan_runs(2)] == [0, 0, 1, 1]
    assert order(plan_runs(4)[:6] + plan_runs(1, start=3)) == order(plan_runs(4))
    assert order(plan_runs(2, first="B")) == "BAAB"


def test_nothing_to_compare_says_what_is_missing() -> None:
    empty = compare(Side({}), Side({}))
    assert (empty.verdict, empty.guarded_by) == ("undecided", None)
    assert (
        empty.next_action == "nothing guarded was measured on both sides: benchmark both at the same levels"
    )
    half = compare(Side({}, {"max_running_requests": 48}), Side({}))
    assert (half.verdict, half.guarded_by) == ("undecided", "max_running_requests")
    assert half.next_action is not None and "capacity value is missing" in half.next_action


def test_sides_from_measurement_rows_name_their_levels() -> None:
    @dataclass
    class Row:
        concurrency: int | None
        request_rate: float | None
        metrics: dict[str, Any]
        client_bound: bool = False

    side = Side.from_measurements(
        [Row(64, None, {"output_throughput": 1582}), Row(None, 8.0, {}, True), Row(64, None, {})],
        capacity={"max_running_requests": 26},
    )
    assert set(side.levels) == {"c=64", "rate=8"}
    assert side.values("c=64", "output_throughput") == [1582.0, None]
    assert side.client_bound_levels == frozenset({"rate=8"})
    assert side.repeats() == 1 and side.capacity == {"max_running_requests": 26}
