"""`timeouts.benchmark` bounds a whole benchmark run (`run_plan`), whatever its levels are doing."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.bench.planning import plan_for
from bot.bench.run import BenchmarkTimeoutError, BenchPlan, run_plan
from bot.config import Settings
from bot.config.schema import BenchProfile, BenchServingCommand


class HangingNode:
    """Node 0 whose bench_serving never finishes; its other commands (the output file's
    removal, which runs however the level ends) answer at once."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False
        self.calls: list[str] = []

    async def run(self, command: str, /, **_: object) -> object:
        self.calls.append(command)
        if command != "bench-serving":
            return SimpleNamespace(exit_status=0, stdout=b"", stderr=b"")
        self.started.set()
        try:
            await asyncio.Event().wait()  # never set: only the bound ends it
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


def hanging_plan(timeout_s: float | None) -> BenchPlan:
    return BenchPlan.build(
        target="t",
        base_url="http://127.0.0.1:9",
        profile_name="p",
        profile=BenchProfile(concurrency=[4], repeats=1, num_requests=8, backend="bench_serving"),
        bench_serving=BenchServingCommand(module="sglang.bench_serving"),
        timeout_s=timeout_s,
    )


async def test_a_benchmark_past_its_bound_fails_naming_the_setting() -> None:
    node = HangingNode()
    with pytest.raises(BenchmarkTimeoutError) as raised:
        await run_plan(hanging_plan(0.05), node=node)
    assert str(raised.value) == "benchmark exceeded timeouts.benchmark (0.05 s)"
    assert node.started.is_set() and node.cancelled  # the level was running and was stopped
    assert node.calls == ["bench-serving", "remove-bench-output"]  # and cleaned up after


async def test_the_plan_of_a_target_carries_its_benchmark_timeout(tmp_path: Path) -> None:
    settings = Settings.model_validate(
        {
            "targets": {
                "lab": {
                    "unit": "sglang.service",
                    "nodes": [{"host": "127.0.0.1", "port": 9}],
                    "timeouts": {"benchmark": "90s"},
                }
            },
            "database": {"sqlite_path": str(tmp_path / "flagbot.db")},
        }
    )
    assert plan_for(settings, "lab").timeout_s == timedelta(seconds=90).total_seconds()
    assert plan_for(settings, "elsewhere", base_url="http://127.0.0.1:9").timeout_s is None
