"""False alarms and power of flagbot's verdicts, by simulation through the real `compare()`.

Every row simulates many A/B comparisons with lognormal run-to-run noise (`--cv`, 3 % by
default) and runs them exactly as the bench runner does: compare at the first planned look,
add the repeats `more_repeats` asks for, compare again, until decided or at the cap. It prints:

1. one guarded metric at one level (the elementary test), against the cap on repeats a side:
   the false "regressed" rate when nothing changed (sequential looks included) and the power to
   call a real 5 % regression "regressed"; next to it, a single look at a fixed n, and peeking at
   every repeat with the full alpha each time (what the correction is for);
2. the spending functions side by side at the default cap;
3. the whole default guard (output_throughput, median_ttft_ms, median_tpot_ms at concurrency 1
   and 64, correlated noise) for the overall verdict: pure noise, a server 5 % slower in every
   metric, and a 5 % regression in one metric at one level only;
4. exactly what a `try` does (`try_like`): the before side measured at min_repeats, sized from
   its own noise by the real `bot.bench.power.size_reference` (it cannot grow after the
   restart), then the after side extended look by look with `compare(looks_on="candidate")`
   until decided or at the cap; one metric at one level and the whole default guard, at 1 % and
   the given noise.

Rates carry a 95 % Clopper-Pearson interval. Prints figures; not a test.

    .venv/bin/python bench/verdict_power.py [--sims 4000] [--cv 0.03] [--seed 1] [--only-try]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import stats  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.bench.power import size_reference
from bot.bench.verdict import Side, VerdictSettings, compare

Draw = Callable[[np.random.Generator, int], tuple[Side, Side]]
ONE = VerdictSettings(guarded={"output_throughput": "higher"})


def one_metric(effect: float, cv: float) -> Draw:
    """A: noise only; B: (1 + effect) x noise. One metric at one level."""

    def draw(rng: np.random.Generator, n: int) -> tuple[Side, Side]:
        a = 1582.0 * np.exp(rng.normal(0.0, cv, n))
        b = 1582.0 * (1.0 + effect) * np.exp(rng.normal(0.0, cv, n))
        return (
            Side({"c=64": [{"output_throughput": float(x)} for x in a]}),
            Side({"c=64": [{"output_throughput": float(x)} for x in b]}),
        )

    return draw


def whole_guard(effects: dict[tuple[str, str], float], cv: float) -> Draw:
    """Three guarded metrics at c=1 and c=64. Throughput and TPOT share most of their noise (the
    same decode speed), TTFT a little; `effects` makes a metric worse by a fraction."""
    corr = np.array([[1.0, 0.9, 0.3], [0.9, 1.0, 0.3], [0.3, 0.3, 1.0]])
    chol = np.linalg.cholesky(corr)
    base = {"c=1": (121.0, 8.26, 150.0), "c=64": (1582.0, 40.5, 900.0)}

    def side(rng: np.random.Generator, n: int, worse: dict[tuple[str, str], float]) -> Side:
        levels = {}
        for level, (tput, tpot, ttft) in base.items():
            z = (chol @ rng.normal(0.0, 1.0, (3, n))).T * cv  # "badness" noise per metric
            runs = []
            for i in range(n):
                slow_t = 1.0 + worse.get(("output_throughput", level), 0.0)
                slow_p = 1.0 + worse.get(("median_tpot_ms", level), 0.0)
                slow_f = 1.0 + worse.get(("median_ttft_ms", level), 0.0)
                runs.append(
                    {
                        "output_throughput": tput / slow_t * float(np.exp(-z[i, 0])),
                        "median_tpot_ms": tpot * slow_p * float(np.exp(z[i, 1])),
                        "median_ttft_ms": ttft * slow_f * float(np.exp(z[i, 2])),
                    }
                )
            levels[level] = runs
        return Side(levels)

    def draw(rng: np.random.Generator, n: int) -> tuple[Side, Side]:
        return side(rng, n, {}), side(rng, n, effects)

    return draw


def trim(side: Side, n: int) -> Side:
    return Side({k: v[:n] for k, v in side.levels.items()})


def sequential(draw: Draw, settings: VerdictSettings, sims: int, seed: int) -> tuple[Counter[str], float]:
    """The runner's loop through the real compare(); returns verdict counts and mean repeats used."""
    rng = np.random.default_rng(seed)
    counts: Counter[str] = Counter()
    used = 0
    for _ in range(sims):
        a, b = draw(rng, settings.max_repeats)
        n = settings.min_repeats
        while True:
            result = compare(trim(a, n), trim(b, n), settings)
            if result.more_repeats is None:
                break
            n += result.more_repeats
        counts[result.verdict] += 1
        used += n
    return counts, used / sims


def try_like(
    draw: Draw, settings: VerdictSettings, sims: int, seed: int
) -> tuple[Counter[str], float, float]:
    """A try through the real sizing and compare(): verdict counts, mean repeats before, after."""
    rng = np.random.default_rng(seed)
    counts: Counter[str] = Counter()
    before_n = after_n = 0
    for _ in range(sims):
        a, b = draw(rng, settings.max_repeats)
        sizing = size_reference(trim(a, settings.min_repeats), settings)
        before = trim(a, sizing.repeats)
        n = settings.min_repeats
        while True:
            result = compare(before, trim(b, n), settings, looks_on="candidate")
            if result.more_repeats is None:
                break
            n += result.more_repeats
        counts[result.verdict] += 1
        before_n += sizing.repeats
        after_n += n
    return counts, before_n / sims, after_n / sims


def fixed(draw: Draw, settings: VerdictSettings, n: int, sims: int, seed: int, *, peek: bool) -> Counter[str]:
    """One planned look at n (the whole alpha), or, `peek`, a look at every n from 2 with the whole
    alpha each time and stopping at the first decision: the uncorrected practice."""
    rng = np.random.default_rng(seed)
    counts: Counter[str] = Counter()
    for _ in range(sims):
        a, b = draw(rng, n)
        for k in range(2, n + 1) if peek else [n]:
            verdict = compare(trim(a, k), trim(b, k), settings, single_look=True).verdict
            if verdict != "undecided":
                break
        counts[verdict] += 1
    return counts


def pct(count: int, sims: int) -> str:
    ci = stats.binomtest(count, sims).proportion_ci(0.95)
    return f"{100 * count / sims:5.1f}% [{100 * ci.low:4.1f}-{100 * ci.high:4.1f}]"


def plan_for(cap: int, base: VerdictSettings) -> VerdictSettings:
    return replace(
        base, min_repeats=min(3, cap), max_repeats=cap, looks=min(base.looks, cap - min(3, cap) + 1)
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sims", type=int, default=4000, help="simulated comparisons per row")
    parser.add_argument("--cv", type=float, default=0.03, help="run-to-run noise (coefficient of variation)")
    parser.add_argument("--effect", type=float, default=-0.05, help="the real regression to detect")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only-try", action="store_true", help="part 4 only (what a try does)")
    args = parser.parse_args()
    sims, cv, started = args.sims, args.cv, time.monotonic()
    print(
        f"noise CV {cv:.1%}, real change {args.effect:+.0%}, min effect 3%, confidence 95%, {sims} sims a row"
    )
    print("verdict rates with 95% Clopper-Pearson intervals; 'regressed' under pure noise is a false alarm\n")
    family = max(sims // 2, 200)
    cases = {
        "pure noise": {},
        "server 5% slower (all metrics)": {
            (m, lv): -args.effect for m in ("output_throughput", "median_tpot_ms") for lv in ("c=1", "c=64")
        },
        "one metric, one level 5% worse": {("output_throughput", "c=64"): -args.effect},
    }
    if not args.only_try:
        parts_one_to_three(args, cases, family)
    try_rows(args, cases, family)
    print(f"\n({family} sims a row in the whole guard's rows; {time.monotonic() - started:.0f} s in all)")


def parts_one_to_three(
    args: argparse.Namespace, cases: dict[str, dict[tuple[str, str], float]], family: int
) -> None:
    sims, cv = args.sims, args.cv
    null, real = one_metric(0.0, cv), one_metric(args.effect, cv)

    print("1. one metric at one level (sequential: looks evenly from 3 to the cap, O'Brien-Fleming spending)")
    print(
        f"{'cap':>4} {'looks':>12} | {'false regressed':>20} {'power':>20} {'mean n':>6} | {'fixed n power':>20} |"
    )
    for cap in (3, 4, 5, 6, 8, 10, 12):
        settings = plan_for(cap, ONE)
        h0, _ = sequential(null, settings, sims, args.seed)
        h1, mean_n = sequential(real, settings, sims, args.seed + 1)
        one = fixed(real, ONE, cap, sims, args.seed + 2, peek=False)
        looks = ",".join(map(str, settings.plan().looks))
        print(
            f"{cap:>4} {looks:>12} | {pct(h0['regressed'], sims):>20} {pct(h1['regressed'], sims):>20} "
            f"{mean_n:6.1f} | {pct(one['regressed'], sims):>20} |"
        )
    peek = fixed(null, ONE, 10, sims, args.seed + 3, peek=True)
    once = fixed(null, ONE, 10, sims, args.seed + 4, peek=False)
    print(f"  without correction, peeking at every n = 2..10: false regressed {pct(peek['regressed'], sims)}")
    print(
        f"  one planned look at n = 10 only:                 false regressed {pct(once['regressed'], sims)}\n"
    )

    print("2. spending functions, cap 10, looks 3,6,10")
    for kind in ("obrien-fleming", "pocock", "linear"):
        settings = replace(ONE, spending=kind)
        h0, _ = sequential(null, settings, sims, args.seed)
        h1, mean_n = sequential(real, settings, sims, args.seed + 1)
        print(
            f"  {kind:>15}: false regressed {pct(h0['regressed'], sims)}, "
            f"power {pct(h1['regressed'], sims)}, mean n {mean_n:.1f}"
        )

    print("\n3. overall verdict over the default guard (3 metrics x c=1, c=64; alpha split over 6 cells)")
    for name, effects in cases.items():
        counts, mean_n = sequential(whole_guard(effects, cv), VerdictSettings(), family, args.seed + 5)
        rates = ", ".join(f"{v} {pct(counts[v], family)}" for v in ("regressed", "no effect", "undecided"))
        print(f"  {name:>32}: {rates}, mean n {mean_n:.1f}")


def try_rows(args: argparse.Namespace, cases: dict[str, dict[tuple[str, str], float]], family: int) -> None:
    sims, cv = args.sims, args.cv
    print(
        "\n4. what a try does: before sized from its own noise (90% power against 5%, cap 10), after sequential"
    )
    for noise in sorted({0.01, cv}):
        h0, _, _ = try_like(one_metric(0.0, noise), ONE, sims, args.seed + 6)
        h1, nb, na = try_like(one_metric(args.effect, noise), ONE, sims, args.seed + 7)
        print(
            f"  one metric, noise {noise:.0%}: false regressed {pct(h0['regressed'], sims)}, "
            f"power {pct(h1['regressed'], sims)}, mean repeats before {nb:.1f}, after {na:.1f}"
        )
    for name, effects in cases.items():
        counts, nb, na = try_like(whole_guard(effects, cv), VerdictSettings(), family, args.seed + 8)
        rates = ", ".join(f"{v} {pct(counts[v], family)}" for v in ("regressed", "no effect", "undecided"))
        print(f"  whole guard, {name:>32}: {rates}, mean repeats before {nb:.1f}, after {na:.1f}")


if __name__ == "__main__":
    main()
