"""Server restarts that `isolate` spends to name the flags behind a regression, by simulation.

For N = 2..16 changed flags, each trial draws a culprit (one flag, or a pair that fails only
together) with a seeded RNG and answers every probe as a monotone server would: the expectation
fails exactly when the probe applies every culprit. Three rankings: none (the changes in random
order), right (the culprits ranked first) and wrong (the culprits ranked last). It prints, as
mean/max over the trials:

- isolate: its probe restarts, next to the proven bounds (one culprit: ⌈log2 N⌉ + 1; a pair:
  ⌈log2 N⌉ + ⌈log2(N-1)⌉ + 2); "+settle" adds the restart that settles the target on the final
  configuration when the last probe was not already that configuration;
- one at a time: the manual way, in the same order: revert one flag per restart (the others
  applied) until the expectation passes. That restart is already the final configuration, but it
  proves only that reverting the flag cures the failure: it never shows the flag alone fails,
  and for a pair it names one member only.

Prints figures; not a test.

    .venv/bin/python bench/isolate_restarts.py [--trials 300] [--seed 1] [--max-n 16]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.loop.isolate import isolate, probe_bound

RANKINGS = ("none", "right", "wrong")
Trial = tuple[int, int]  # (isolate probes, isolate probes + settle restart)


def pair_bound(n: int) -> int:
    return (n - 1).bit_length() + (n - 2).bit_length() + 2


def arrange(changes: list[str], culprits: Sequence[str], ranking: str, rng: random.Random) -> list[str]:
    """The suspects' order: random (none), culprits first (right) or culprits last (wrong)."""
    others = [c for c in changes if c not in culprits]
    rng.shuffle(others)
    shuffled = list(culprits)
    rng.shuffle(shuffled)
    if ranking == "right":
        return shuffled + others
    if ranking == "wrong":
        return others + shuffled
    return rng.sample(changes, len(changes))


async def run_isolate(changes: list[str], culprits: frozenset[str], order: list[str], ranked: bool) -> Trial:
    async def server(applied: frozenset[str]) -> bool:
        return not culprits <= applied

    # no ranking: isolate sees the changes in that random order and no `order`
    result = await isolate(order, server) if not ranked else await isolate(changes, server, order=order)
    assert frozenset(result.culprits) == culprits, (changes, culprits, order)
    probes = len(result.probes)
    settled = bool(result.probes) and frozenset(result.probes[-1].applied) == frozenset(result.final)
    return probes, probes + (0 if settled else 1)


def one_at_a_time(order: list[str], culprits: frozenset[str]) -> int:
    """Restarts until reverting one flag (the rest applied) passes: the first culprit in the order."""
    return next(i for i, change in enumerate(order, 1) if change in culprits)


def figure(values: list[int]) -> str:
    return f"{statistics.fmean(values):6.1f}/{max(values):<2d}"


async def table(size: int, trials: int, max_n: int, rng: random.Random, bound: Callable[[int], int]) -> None:
    cells = " ".join(f"{r:>9}" for r in RANKINGS)
    print(f"{'':>3} {'':>5} | {'isolate probes':^29} | {'isolate':>9} | {'one at a time':^29}")
    print(f"{'N':>3} {'bound':>5} | {cells} | {'+settle':>9} | {cells}")
    for n in range(2, max_n + 1):
        changes = [f"--flag-{i:02d}" for i in range(1, n + 1)]
        probes: dict[str, list[int]] = {r: [] for r in RANKINGS}
        manual: dict[str, list[int]] = {r: [] for r in RANKINGS}
        settle: list[int] = []
        for _ in range(trials):
            culprits = rng.sample(changes, size)
            for ranking in RANKINGS:
                order = arrange(changes, culprits, ranking, rng)
                used, with_settle = await run_isolate(
                    changes, frozenset(culprits), order, ranked=ranking != "none"
                )
                probes[ranking].append(used)
                manual[ranking].append(one_at_a_time(order, frozenset(culprits)))
                if ranking == "none":
                    settle.append(with_settle)
        worst = max(max(v) for v in probes.values())
        assert worst <= bound(n), (n, worst)
        ours = " ".join(figure(probes[r]) for r in RANKINGS)
        theirs = " ".join(figure(manual[r]) for r in RANKINGS)
        print(f"{n:>3} {bound(n):>5} | {ours} | {figure(settle)} | {theirs}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=300, help="random culprits per N and ranking")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-n", type=int, default=16, help="the most changed flags simulated")
    args = parser.parse_args()
    rng, started = random.Random(args.seed), time.monotonic()
    print(f"restarts, mean/max over {args.trials} trials a row (seed {args.seed}); bound: proven worst case")
    print("rankings: none (random order), right (culprits ranked first), wrong (culprits ranked last)")
    print("\n1. one culprit")
    asyncio.run(table(1, args.trials, args.max_n, rng, probe_bound))
    print("\n2. a pair that fails only together (one at a time names only one member of it)")
    asyncio.run(table(2, args.trials, args.max_n, rng, pair_bound))
    print(f"\n({time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    main()
