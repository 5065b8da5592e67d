"""The restart counts the README promises for `isolate` are the maxima bench/isolate_restarts.py
prints in its "+settle" column: the probes and the restart that settles the target (an earlier
README left the settle restart out: 2 where N = 2 needs 3, and 15 minutes a restart).

Runs the bench script's own trial (`run_isolate`) over every position of one culprit among N
changes, in the given order, reversed, and ranked right or wrong, and compares the worst with
`restart_bound` (what `max_restarts_per_hour` is checked against) and with the README's figures.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from bot.loop.isolate import restart_bound

ROOT = Path(__file__).parents[2]
ISOLATE_ROW = next(line for line in (ROOT / "README.md").read_text().splitlines() if "`isolate " in line)


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("isolate_restarts", ROOT / "bench" / "isolate_restarts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _worst_with_settle(n: int) -> int:
    bench = _bench()
    changes = [f"--flag-{k}" for k in range(n)]
    worst = 0
    for culprit in changes:
        others = [c for c in changes if c != culprit]
        orders = [
            (changes, False),
            (changes[::-1], False),
            ([culprit, *others], True),
            ([*others, culprit], True),
        ]
        for order, ranked in orders:
            _, with_settle = await bench.run_isolate(changes, frozenset({culprit}), order, ranked)
            worst = max(worst, with_settle)
    return worst


async def test_the_readme_gives_the_worst_case_with_the_settle_restart() -> None:
    assert "⌈log2 N⌉+2 restarts" in ISOLATE_ROW
    stated = {int(n): int(count) for count, n in re.findall(r"(\d+) for N = (\d+)", ISOLATE_ROW)}
    assert set(stated) == {2, 8}
    for n in range(2, 9):
        worst = await _worst_with_settle(n)
        assert worst == restart_bound(n) == (n - 1).bit_length() + 2
        if n in stated:
            assert stated[n] == worst
