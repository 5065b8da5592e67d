"""What one step boundary of a `try` costs flagbot, without a testbed (issue 16, item 9).

`bench/experiment_overhead.py` found the time a try spends between its steps grown from about
0.06 s to about 0.23 s per experiment on the testbed (docs/performance.md). This script takes the
testbed away to tell flagbot's own cost from what only runs there: the built-in `try` playbook
with its real steps and a real SQLite store, on the fake target layer of the component tests
(tests/support/loop_fake_target.py: no SSH, no server), `--runs` times; it prints each run's
row span, the sum of its steps' walls, the difference, and each boundary in milliseconds.
Prints figures; not a test. No root.

    .venv/bin/python bench/step_boundaries.py [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests.support` from this checkout

from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter
from bot.sglang.change import Change
from bot.store import AsyncStore, Store
from bot.store.experiments import get_experiment, list_steps
from tests.component.loop.test_playbooks_cite_measurements import fake_everywhere
from tests.support.loop_fake_target import TARGET, settings

VALUES = ("0.85", "0.86")
"""`--mem-fraction-static` values set in turn: each run changes something, the fake's capacity stays."""


async def measure(runs: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="flagbot-step-boundaries-"))
    opened = Store.open(None, sqlite_path=base / "state" / "flagbot.db")
    opened.upgrade()
    store = AsyncStore(opened)
    engine = Engine(settings(base), store, MemoryReporter(), cache_dir=base / "cache")
    try:
        with fake_everywhere(store):
            for run in range(1, runs + 1):
                change = Change("set", "--mem-fraction-static", VALUES[run % 2])
                outcome = await engine.run(
                    "try", {"changes": [change.to_json()], "keep": "always"}, target=TARGET, actor="cli:bench"
                )
                row = get_experiment(opened, outcome.experiment_id)
                steps = list_steps(opened, outcome.experiment_id)
                assert row is not None
                assert row.started_at is not None
                assert row.finished_at is not None
                walls = sum((s.finished_at - s.started_at).total_seconds() for s in steps if s.finished_at)
                span = (row.finished_at - row.started_at).total_seconds()
                gaps = [
                    (b.started_at - a.finished_at).total_seconds() * 1000
                    for a, b in itertools.pairwise(steps)
                    if a.finished_at is not None
                ]
                print(
                    f"run {run}: {outcome.status}, {len(steps)} steps; span {span:.3f} s, steps {walls:.3f} s, "
                    f"between steps {span - walls:.3f} s; boundaries ms: {' '.join(f'{g:.0f}' for g in gaps)}"
                )
    finally:
        store._executor.shutdown(wait=True)
        opened.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    asyncio.run(measure(parser.parse_args().runs))


if __name__ == "__main__":
    main()
