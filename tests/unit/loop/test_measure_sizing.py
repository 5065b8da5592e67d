"""A try's before side is sized from the set its run just stored, without reading it back
(bot/loop/steps/measure_steps.py `_size`): the run holds what the store would return."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from bot.bench.compare_sets import side_of
from bot.bench.power import size_reference
from bot.bench.run import BenchRun
from bot.bench.verdict import VerdictSettings
from bot.config.schema import Verdicts
from bot.loop.steps.measure_steps import _size
from bot.store import Store
from bot.store.bench_repo import add_measurements, load_set
from bot.store.models import Measurement, MeasurementSet

THROUGHPUT = {(1, 0): 101.0, (8, 0): 640.0, (1, 1): 97.5, (8, 1): 655.0, (1, 2): 99.0, (8, 2): 612.0}
"""Output throughput by (concurrency, repeat): noisy enough at c=8 for the sizing to ask for more."""


def stored_run(store: Store) -> BenchRun:
    """A set stored as `bot.bench.run.run_plan` stores one: the row, then each level and repeat in
    the order it ran (repeats outermost), then the row again with its summary."""
    mset = store.add(MeasurementSet(target="t", profile="p", params={}))
    assert mset.id is not None
    rows = []
    for repeat in range(3):
        for concurrency in (1, 8):
            row = Measurement(
                target="t",
                profile="p",
                concurrency=concurrency,
                repeat=repeat,
                metrics={"output_throughput": THROUGHPUT[concurrency, repeat], "completed": 8},
                client_bound=(concurrency, repeat) == (8, 2),
                set_id=mset.id,
            )
            add_measurements(store, mset.id, [row])
            rows.append(row)
    mset.summary = {"levels": []}
    return BenchRun(store.add(mset), rows, [])


def test_the_sizing_from_the_run_is_the_sizing_from_the_stored_set(tmp_path: Path) -> None:
    store = Store.open(None, sqlite_path=tmp_path / "flagbot.db")
    store.upgrade()
    try:
        run = stored_run(store)
        assert run.set.id is not None
        loaded = load_set(store, run.set.id)
        assert loaded is not None
        ctx = SimpleNamespace(settings=SimpleNamespace(verdicts=Verdicts()))  # no store: nothing read back
        settings = VerdictSettings.from_config(Verdicts())

        sized = _size(ctx, run)  # type: ignore[arg-type]  # the sizing reads only the settings

        assert sized == size_reference(side_of(loaded), settings)
        assert sized.measured == 3 and sized.cell is not None
    finally:
        store.close()
