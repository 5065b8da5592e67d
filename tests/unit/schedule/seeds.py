"""Stored rows the drift and check tests compare: a start of `lab` and a benchmark of it."""

from __future__ import annotations

from typing import Any, cast

from bot.store import Measurement, Snapshot, Store
from bot.store.bench_repo import save_set
from bot.store.models import MeasurementSet
from tests.support.schedule import FLAGS as SEEDED_FLAGS

FLAGS = cast(list[dict[str, Any]], SEEDED_FLAGS)


def snapshot(store: Store, invocation: str = "inv-1", capacity: int = 48) -> int:
    """A ready start of `lab` with the seeded flags and `capacity` slots."""
    row = store.add(
        Snapshot(
            target="lab",
            invocation_id=invocation,
            requested_flags=FLAGS,
            effective={"max_running_requests": capacity},
            ready=True,
        )
    )
    assert row.id is not None
    return row.id


def bench_set(store: Store, snapshot_id: int, speed: float, label: str, profile: str = "quick") -> int:
    """Six repeats at concurrency 1 and 64 with a little noise, `speed` times the seeds' figures
    (121 tok/s single, 1582 tok/s at 64): enough for a decided verdict in a single look."""
    rows = []
    for repeat in range(6):
        f = speed * (1.0, 1.004, 0.997)[repeat % 3]
        for concurrency, base in ((1, 121.0), (64, 1582.0)):
            metrics = {"output_throughput": base * f, "median_ttft_ms": 150.0 / f, "median_tpot_ms": 8.0 / f}
            rows.append(Measurement(target="lab", concurrency=concurrency, repeat=repeat, metrics=metrics))
    loaded = save_set(
        store, MeasurementSet(target="lab", profile=profile, label=label, snapshot_id=snapshot_id), rows
    )
    assert loaded.set.id is not None
    return loaded.set.id
