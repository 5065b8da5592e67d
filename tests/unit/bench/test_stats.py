"""Repeat statistics, the log-ratio interval and alpha spending, checked against scipy and by coverage."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps  # type: ignore[import-untyped]

from bot.bench.stats import (
    LookPlan,
    chi2_quantile,
    log_ratio_interval,
    normal_cdf,
    normal_quantile,
    repeat_stats,
    spent,
    t_quantile,
)


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


@pytest.mark.parametrize("p", [1e-6, 0.0125, 0.025, 0.05, 0.5, 0.9, 0.95, 0.975, 0.9875, 0.999999])
@pytest.mark.parametrize("df", [1.0, 1.7, 2.0, 3.0, 4.41, 9.0, 29.9, 120.0, 1e6])
def test_the_quantiles_are_scipy_stats_own(p: float, df: float) -> None:
    """The light scipy.special kernels give what scipy.stats gives, to the last bits: a verdict
    cannot change because the quantile's import did."""
    assert t_quantile(p, df) == pytest.approx(float(sps.t.ppf(p, df)), rel=1e-13, abs=1e-13)
    assert chi2_quantile(p, df) == pytest.approx(float(sps.chi2.ppf(p, df)), rel=1e-13, abs=1e-13)
    assert normal_quantile(p) == pytest.approx(float(sps.norm.ppf(p)), rel=1e-13, abs=1e-13)
    x = t_quantile(p, df)
    assert normal_cdf(x) == pytest.approx(float(sps.norm.cdf(x)), rel=1e-13, abs=1e-15)


def test_the_interval_is_scipys_t_interval() -> None:
    values = [1582.0, 1561.0, 1597.0, 1590.5]
    s = repeat_stats(values, confidence=0.9)
    sd = float(np.std(values, ddof=1))
    low, high = sps.t.interval(0.9, 3, loc=float(np.mean(values)), scale=sd / 2.0)
    assert s.low == pytest.approx(float(low), rel=1e-15)
    assert s.high == pytest.approx(float(high), rel=1e-15)


def test_a_verdict_and_its_sizing_never_import_scipy_stats() -> None:
    """What a `try` computes (intervals, spending, the before side's sizing) stays on scipy.special:
    scipy.stats' import is 0.7 s of CPU in the first measure step (issue 16 item 9)."""
    script = (
        "import sys\n"
        "from bot.bench.power import power\n"
        "from bot.bench.stats import LookPlan, log_ratio_interval, repeat_stats, spent\n"
        "repeat_stats([1.0, 1.2, 1.1]); log_ratio_interval([1.0, 1.1], [1.2, 1.3], alpha=0.05)\n"
        "spent(0.5, 0.05); LookPlan.evenly(3, 9, 3, 0.05).alpha_at(6)\n"
        "power(0.03, 3, 9, effect=0.05, min_effect=0.02, alpha=0.05, better='higher')\n"
        "print('scipy.special' in sys.modules, 'scipy.stats' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]
