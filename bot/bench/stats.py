"""Statistics over benchmark repeats: per-metric summaries, the ratio interval, sequential looks.

The unit of evidence is one *repeat*: one benchmark run at one concurrency level, whose metric
(say `output_throughput`) is itself an average over dozens of requests. Hence:

* **Summaries** use Student's t on the repeats. Each repeat is a mean of many requests, so it is
  close to normal (central limit theorem), and with the 3-10 repeats flagbot can afford the
  bootstrap is the wrong tool: resampling 3 values has 10 distinct outcomes and its intervals
  are too narrow. `method="bootstrap"` (scipy's BCa) is offered for large samples of skewed values
  (per-request latencies, n >= 20) and falls back to t below that, saying so in `method`.
* **Comparisons** use a Welch t interval on the *logarithms* of the repeats; the difference of
  log means is the log of the ratio candidate/reference. Run-to-run noise is multiplicative
  (a run is "2 % slow", not "30 tok/s slow"), a ratio does not depend on the unit or the size
  of the number (121 tok/s and 1582 tok/s get the same treatment), exponentiating gives an
  honest asymmetric interval, and nothing is divided by a noisy reference mean (the Fieller
  problem of `(mean_b - mean_a) / mean_a`). Welch, not pooled: a flag may change the jitter too.
* **Sequential looks**: looking at the data, adding repeats and looking again inflates the false
  alarm rate. The error budget alpha is *spent* across the planned looks with a Lan-DeMets
  spending function (O'Brien-Fleming type by default: almost nothing early, nearly all of alpha
  at the last look), and each look is tested at its own increment. Whatever the correlation
  between looks, the union bound (Bonferroni over looks) keeps the total at most alpha; the
  looks are positively correlated, so the real rate is lower (`bench/verdict_power.py` shows it).

numpy and scipy only: every quantile comes from scipy.special, the functions scipy.stats itself
calls (`stdtrit`, `gammaincinv`, `ndtr`, `ndtri`), and the bootstrap from scipy.stats. Why not
scipy.stats for the quantiles too: its import costs about 0.7 s of CPU against 0.15 s for
scipy.special, paid by the first measure step of every `flagbot try` process (issue 16 item 9).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "BOOTSTRAP_MIN_N",
    "LookPlan",
    "Method",
    "RatioInterval",
    "RepeatStats",
    "Spending",
    "chi2_quantile",
    "log_ratio_interval",
    "normal_cdf",
    "normal_quantile",
    "repeat_stats",
    "scipy_stats",
    "spent",
    "t_quantile",
]

Method = Literal["t", "bootstrap"]
Spending = Literal["obrien-fleming", "pocock", "linear"]
BOOTSTRAP_MIN_N = 20
"""Below this many values the bootstrap's own error dominates; Student t is used instead."""


@functools.cache
def scipy_stats() -> Any:
    """`scipy.stats`, imported only for the bootstrap (n >= 20, asked for by name). Why deferred:
    SciPy's stats costs about 0.7 s of CPU to import, and no `try`, verdict or stored read needs it;
    the quantiles below come from the much lighter scipy.special."""
    # deferred: scipy.stats costs ~0.7 s of CPU at import; only the bootstrap needs it
    from scipy import stats  # type: ignore[import-untyped]  # no stubs installed; results are cast

    return stats


@functools.cache
def _special() -> Any:
    """`scipy.special`, imported on the first quantile computed. Why deferred: about 0.15 s of CPU,
    and the commands that only read stored verdicts (`status`, `log`, `explain`, a button's card)
    load this module without computing anything. Cached, so the power simulation's hundreds of
    thousands of calls pay one dictionary lookup each."""
    # deferred: scipy.special costs ~0.15 s of CPU at import; reading a stored verdict never needs it
    from scipy import special  # results are cast to float; scipy.special's ufuncs are untyped

    return special


def t_quantile(p: float, df: float) -> float:
    """Student t's quantile at probability `p` for `df` (real, Welch's are not integers) degrees of
    freedom: scipy.stats.t.ppf's own kernel, `stdtrit`."""
    return float(_special().stdtrit(df, p))


def chi2_quantile(p: float, df: float) -> float:
    """The chi-square quantile at `p`: scipy.stats.chi2.ppf's own kernel, 2 * gammaincinv(df/2, p)."""
    return float(2.0 * _special().gammaincinv(df / 2.0, p))


def normal_cdf(x: float) -> float:
    """The standard normal's distribution function (scipy.stats.norm.cdf's kernel, `ndtr`)."""
    return float(_special().ndtr(x))


def normal_quantile(p: float) -> float:
    """The standard normal's quantile (scipy.stats.norm.ppf's kernel, `ndtri`)."""
    return float(_special().ndtri(p))


def _clean(values: Sequence[float | int | None]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The finite values as floats; None and NaN (a metric a run could not compute) are dropped."""
    array: np.ndarray[Any, np.dtype[np.float64]] = np.array([v for v in values if v is not None], dtype=float)
    finite: np.ndarray[Any, np.dtype[np.float64]] = array[np.isfinite(array)]
    return finite


@dataclass(frozen=True)
class RepeatStats:
    """One metric over N repeats: mean, sample standard deviation, CV and a confidence interval.

    `low`/`high` are None when there is no interval to give (fewer than two values). `cv` is
    sd/mean, the run-to-run noise in the units the verdict thresholds use (fractions).
    """

    n: int
    mean: float | None
    sd: float | None
    cv: float | None
    low: float | None
    high: float | None
    confidence: float
    method: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RepeatStats:
        return cls(**data)


def repeat_stats(
    values: Sequence[float | int | None], *, confidence: float = 0.95, method: Method = "t"
) -> RepeatStats:
    """Mean, sd, CV and a two-sided interval of the mean at `confidence` (see the module doc)."""
    x = _clean(values)
    n = int(x.size)
    if n == 0:
        return RepeatStats(0, None, None, None, None, None, confidence, method)
    mean = float(x.mean())
    if n == 1:
        return RepeatStats(1, mean, None, None, None, None, confidence, method)
    sd = float(x.std(ddof=1))
    cv = sd / abs(mean) if mean != 0 else None
    if sd == 0.0:
        return RepeatStats(n, mean, 0.0, cv, mean, mean, confidence, "t")
    if method == "bootstrap" and n >= BOOTSTRAP_MIN_N:
        result = scipy_stats().bootstrap(
            (x,), np.mean, confidence_level=confidence, method="BCa", rng=np.random.default_rng(0)
        )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        return RepeatStats(n, mean, sd, cv, low, high, confidence, "bootstrap")
    # scipy.stats.t.interval's own arithmetic: the quantiles at (1 -/+ confidence) / 2, scaled, shifted
    scale = sd / math.sqrt(n)
    low = t_quantile((1.0 - confidence) / 2.0, n - 1) * scale + mean
    high = t_quantile((1.0 + confidence) / 2.0, n - 1) * scale + mean
    used = "t" if method == "t" else f"t (bootstrap needs n>={BOOTSTRAP_MIN_N})"
    return RepeatStats(n, mean, sd, cv, float(low), float(high), confidence, used)


@dataclass(frozen=True)
class RatioInterval:
    """candidate/reference - 1 (a fraction: -0.15 is 15 % lower) with its two-sided interval.

    `alpha` is the error allowed on *each* side, so the interval's coverage is 1 - 2*alpha: every
    verdict is a one-sided claim (worse, better, or inside both margins as in TOST).
    """

    change: float
    low: float
    high: float
    log_ratio: float
    se: float
    df: float
    alpha: float

    def to_json(self) -> dict[str, Any]:
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()
        }


def log_ratio_interval(
    reference: Sequence[float | int | None], candidate: Sequence[float | int | None], *, alpha: float
) -> RatioInterval:
    """Welch t interval on mean(log candidate) - mean(log reference), mapped back to a change.

    Needs at least two positive values a side (ValueError otherwise). When neither side varies
    at all the interval is the point itself: there is no noise to be uncertain about.
    """
    a, b = _clean(reference), _clean(candidate)
    if a.size < 2 or b.size < 2:
        raise ValueError("at least two repeats a side are needed for an interval")
    if (a <= 0).any() or (b <= 0).any():
        raise ValueError("a ratio needs positive values")
    la, lb = np.log(a), np.log(b)
    d = float(lb.mean() - la.mean())
    if np.ptp(la) == 0.0 and np.ptp(lb) == 0.0:
        return RatioInterval(_change(d), _change(d), _change(d), d, 0.0, math.inf, alpha)
    va, vb = float(la.var(ddof=1)) / la.size, float(lb.var(ddof=1)) / lb.size
    se = math.sqrt(va + vb)
    # Welch-Satterthwaite degrees of freedom; the same interval as scipy's
    # ttest_ind(equal_var=False).confidence_interval (a test checks it), without its per-call overhead,
    # which matters to the power simulation's hundreds of thousands of comparisons.
    df = (va + vb) ** 2 / (va**2 / (la.size - 1) + vb**2 / (lb.size - 1))
    q = t_quantile(1.0 - alpha, df)
    low, high = d - q * se, d + q * se
    return RatioInterval(_change(d), _change(low), _change(high), d, se, df, alpha)


def _change(log_ratio: float) -> float:
    """exp(x) - 1, saturating at +inf: a tiny alpha with two repeats gives bounds past exp's range."""
    return math.expm1(log_ratio) if log_ratio < 700.0 else math.inf


def spent(fraction: float, alpha: float, kind: Spending = "obrien-fleming") -> float:
    """Cumulative one-sided alpha spent once `fraction` (0..1) of the planned repeats are in.

    Lan-DeMets O'Brien-Fleming type 2(1 - Phi(z_{1-alpha/2} / sqrt(t))), Pocock type
    alpha * ln(1 + (e - 1) t), or linear alpha * t. All are 0 at t = 0 and alpha at t = 1.
    """
    t = min(max(fraction, 0.0), 1.0)
    if t == 0.0:
        return 0.0
    if kind == "obrien-fleming":
        z = normal_quantile(1.0 - alpha / 2.0)
        return 2.0 * normal_cdf(-z / math.sqrt(t))
    if kind == "pocock":
        return alpha * math.log1p((math.e - 1.0) * t)
    return alpha * t


@dataclass(frozen=True)
class LookPlan:
    """When the verdict looks at the data (repeats a side) and how much alpha each look may use.

    `looks` are planned in advance, evenly from `min_repeats` to `max_repeats`; the guarantee
    (false alarms at most `alpha` over all looks) holds when comparisons happen at these counts,
    which is what `next_action` asks for. A comparison at an unplanned count n is charged the
    spending between the previous planned look and n, so looking early costs alpha as well.
    """

    looks: tuple[int, ...]
    alpha: float
    spending: Spending = "obrien-fleming"

    @classmethod
    def evenly(
        cls,
        min_repeats: int,
        max_repeats: int,
        count: int,
        alpha: float,
        spending: Spending = "obrien-fleming",
    ) -> LookPlan:
        if not 2 <= min_repeats <= max_repeats:
            raise ValueError("need 2 <= min_repeats <= max_repeats")
        points = np.linspace(min_repeats, max_repeats, max(1, count)) if count > 1 else [max_repeats]
        looks = tuple(sorted({round(float(p)) for p in points}))
        return cls(looks, alpha, spending)

    @property
    def cap(self) -> int:
        return self.looks[-1]

    def index(self, n: int) -> int:
        """1-based number of the planned look n repeats reach (0: before the first look)."""
        return sum(1 for look in self.looks if look <= n)

    def alpha_at(self, n: int) -> float:
        """The one-sided alpha a comparison with n repeats a side may use (past the cap: the last look's)."""
        n = min(n, self.cap)
        previous = max((look for look in self.looks if look < n), default=0)
        return spent(n / self.cap, self.alpha, self.spending) - spent(
            previous / self.cap, self.alpha, self.spending
        )

    def next_look(self, n: int) -> int | None:
        """The repeats a side of the next planned look after n, None at or past the cap."""
        return next((look for look in self.looks if look > n), None)

    def to_json(self) -> dict[str, Any]:
        return {"looks": list(self.looks), "alpha": self.alpha, "spending": self.spending}
