"""The pure helpers of the domain actions: flag sets as JSON, metric values, revert's inverse changes."""

from __future__ import annotations

import time

from bot.loop.run_state import PreflightFacts, RunState
from bot.loop.steps.common import bench_value, flags_from_json, is_server_metric, snapshot_value
from bot.loop.steps.state_steps import _inverse
from bot.sglang.change import Change
from bot.sglang.flagset import FlagItem, FlagSet
from bot.store.models import Snapshot

FLAGS = FlagSet(
    (FlagItem("--tp", "2"), FlagItem("--cuda-graph-bs", ("4", "8")), FlagItem("--enable-metrics"))
)


def test_flag_sets_survive_json() -> None:
    assert flags_from_json(FLAGS.to_json()) == FLAGS


def test_snapshot_values_parsed_and_effective() -> None:
    snap = Snapshot(
        target="t",
        server_args={"max_running_requests": 48},
        effective={"max_running_requests": 26},
        ready=True,
        startup_seconds=9.5,
    )
    assert snapshot_value(snap, "max_running_requests") == 26
    assert snapshot_value(snap, "parsed.max_running_requests") == 48
    assert snapshot_value(snap.model_dump(), "startup_seconds") == 9.5
    assert snapshot_value(None, "max_running_requests") is None
    assert is_server_metric("parsed.tp_size") and not is_server_metric("output_throughput")


def test_bench_value_is_the_mean_at_the_highest_concurrency() -> None:
    summary = {
        "levels": [
            {"concurrency": 1, "output_throughput": 120.0},
            {"concurrency": 64, "output_throughput": 1500},
        ]
    }
    assert bench_value(summary, "output_throughput") == 1500.0
    assert bench_value({"levels": []}, "output_throughput") is None
    assert bench_value(summary, "median_ttft_ms") is None


def test_inverse_changes_undo_add_set_and_remove() -> None:
    before = FLAGS
    after_add = [*FLAGS.items, FlagItem("--enable-x")]
    assert _inverse(Change("add", "--enable-x"), before, after_add) == list(FLAGS.items)
    after_set = [FlagItem("--tp", "4"), *FLAGS.items[1:]]
    assert _inverse(Change("set", "--tp", "4"), before, after_set) == list(FLAGS.items)
    after_remove = list(FLAGS.items[:2])
    assert _inverse(Change("remove", "--enable-metrics"), before, after_remove) == list(FLAGS.items)


def test_inverse_compares_names_canonically() -> None:
    from bot.sglang.catalog import FlagCatalog

    catalog = FlagCatalog.load("0.5.10")
    before = FlagSet((FlagItem("--tp", "2"), FlagItem("--enable-metrics")))
    now = [FlagItem("--tp-size", "4"), FlagItem("--enable-metrics")]
    undone = _inverse(Change("set", "--tp-size", "4"), before, now, catalog.canonical)
    assert undone == list(before.items)


def test_the_snapshot_before_reuses_only_gpu_facts_the_preflight_just_read() -> None:
    from types import SimpleNamespace

    from bot.loop.steps.target_steps import GPU_FACTS_FRESH_S, _fresh_gpus

    gpus = {"n0": [{"index": 0}], "n1": [{"index": 0}]}

    def ctx(read_at: float | None) -> SimpleNamespace:
        return SimpleNamespace(state=RunState(preflight=PreflightFacts(gpus=gpus, gpus_read_at=read_at)))

    now = time.time()
    assert _fresh_gpus(ctx(now - 1)) == gpus  # type: ignore[arg-type]
    assert _fresh_gpus(ctx(now - GPU_FACTS_FRESH_S - 1)) is None  # type: ignore[arg-type]  # a resumed run
    assert _fresh_gpus(ctx(None)) is None  # type: ignore[arg-type]  # a preflight of an older version
    assert _fresh_gpus(SimpleNamespace(state=RunState())) is None  # type: ignore[arg-type]  # no preflight
