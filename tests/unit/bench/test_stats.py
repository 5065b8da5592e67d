"""Repeat statistics, the log-ratio interval and alpha spending, checked against scipy and by coverage."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps  # type: ignore[import-untyped]

from bot.bench.stats import LookPlan, log_ratio_interval, repeat_stats, spent


def test_repeat_stats_match_a_textbook_t_interval() -> None:
    values = [1582.0, 1561.0, 1597.0]
    s = repeat_stats(values, confidence=0.95)
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    half = sps.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert s.n == 3 and s.method == "t"
    assert s.mean == pytest.approx(mean)
    assert s.sd == pytest.approx(sd)
    assert s.cv == pytest.approx(sd / mean)
    assert s.low == pytest.approx(mean - half)
    assert s.high == pytest.approx(mean + half)


def test_missing_and_degenerate_samples() -> None:
    assert repeat_stats([]).mean is None
    one = repeat_stats([121.0, None, float("nan")])
    assert (one.n, one.mean, one.low, one.cv) == (1, 121.0, None, None)
    flat = repeat_stats([5.0, 5.0, 5.0])
    assert (flat.low, flat.high, flat.cv) == (5.0, 5.0, 0.0)


def test_bootstrap_only_for_large_samples_and_says_so() -> None:
    rng = np.random.default_rng(3)
    small = repeat_stats(list(rng.normal(100, 5, 5)), method="bootstrap")
    assert small.method.startswith("t (bootstrap needs")
    skewed = list(rng.lognormal(4.0, 0.5, 200))
    boot = repeat_stats(skewed, method="bootstrap")
    assert boot.method == "bootstrap"
    assert boot.low is not None and boot.high is not None and boot.low < boot.mean < boot.high  # type: ignore[operator]


def test_log_ratio_interval_is_welch_on_logs() -> None:
    a, b = [100.0, 102.0, 98.0, 101.0], [85.0, 86.5, 84.0, 85.2]
    r = log_ratio_interval(a, b, alpha=0.05)
    welch = sps.ttest_ind(np.log(b), np.log(a), equal_var=False)
    ci = welch.confidence_interval(0.90)
    assert r.log_ratio == pytest.approx(np.log(b).mean() - np.log(a).mean())
    assert r.low == pytest.approx(math.expm1(ci.low))
    assert r.high == pytest.approx(math.expm1(ci.high))
    assert r.low < r.change < r.high < 0
    assert r.change == pytest.approx(-0.15, abs=0.01)


def test_log_ratio_interval_refuses_what_it_cannot_judge() -> None:
    with pytest.raises(ValueError, match="two repeats"):
        log_ratio_interval([1.0], [1.0, 2.0], alpha=0.05)
    with pytest.raises(ValueError, match="positive"):
        log_ratio_interval([0.0, 1.0], [1.0, 2.0], alpha=0.05)
    same = log_ratio_interval([3.0, 3.0], [3.0, 3.0], alpha=0.05)
    assert (same.change, same.low, same.high) == (0.0, 0.0, 0.0)


def test_interval_covers_the_true_ratio_at_its_level() -> None:
    """Coverage of the 90 % interval over 2000 fixed-seed simulations with 3 % noise, n = 3."""
    rng = np.random.default_rng(42)
    true = 0.95
    hits = 0
    for _ in range(2000):
        a = 1000 * np.exp(rng.normal(0, 0.03, 3))
        b = 1000 * true * np.exp(rng.normal(0, 0.03, 3))
        r = log_ratio_interval(list(a), list(b), alpha=0.05)
        hits += r.low <= true - 1 <= r.high
    assert 0.87 <= hits / 2000 <= 0.93


@given(st.sampled_from(["obrien-fleming", "pocock", "linear"]), st.floats(0.001, 0.2))
@settings(max_examples=50, deadline=None)
def test_spending_goes_from_nothing_to_alpha(kind: str, alpha: float) -> None:
    ts = np.linspace(0, 1, 11)
    values = [spent(float(t), alpha, kind) for t in ts]  # type: ignore[arg-type]
    assert values[0] == 0.0
    assert values[-1] == pytest.approx(alpha)
    assert all(x <= y + 1e-15 for x, y in itertools.pairwise(values))


def test_obrien_fleming_keeps_most_alpha_for_the_last_look() -> None:
    plan = LookPlan.evenly(3, 10, 3, 0.05)
    assert plan.looks == (3, 6, 10)
    increments = [plan.alpha_at(n) for n in plan.looks]
    assert sum(increments) == pytest.approx(0.05)
    assert increments[0] < 0.001 < increments[1] < increments[2]
    assert plan.index(2) == 0 and plan.index(3) == 1 and plan.index(7) == 2 and plan.index(10) == 3
    assert plan.next_look(3) == 6 and plan.next_look(6) == 10 and plan.next_look(10) is None


def test_an_unplanned_look_is_charged_too() -> None:
    plan = LookPlan.evenly(3, 10, 3, 0.05)
    assert plan.alpha_at(5) == pytest.approx(spent(0.5, 0.05) - spent(0.3, 0.05))
    assert plan.alpha_at(20) == pytest.approx(plan.alpha_at(10))
    assert LookPlan.evenly(3, 10, 1, 0.05).looks == (10,)
    with pytest.raises(ValueError, match="min_repeats"):
        LookPlan.evenly(1, 10, 3, 0.05)
