"""The load generator against a real twin process, compared with the twin's ground truth.

Tolerances are wide on purpose (a shared, loaded 2-core machine runs the twin, the generator
and other tests at once); `bench/loadgen_fidelity.py` measures the precision.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from bot.bench.loadgen import LoadError, LoadSpec, run_load, run_load_async
from tests.component.bench.conftest import OUTPUT_LEN, measured_truth, slowed, twin_config
from tests.component.test_cli import flagbot
from tests.support.twin_process import TwinFactory


def spec(base: str, **overrides: Any) -> LoadSpec:
    values: dict[str, Any] = {"base_url": base, "input_len": 512, "output_len": OUTPUT_LEN, "seed": 5}
    return LoadSpec(**{**values, **overrides})


def truth_figures(records: list[dict[str, Any]]) -> dict[str, float]:
    ok = [r for r in records if not r["failed"]]
    first = min(r["arrival_unix"] for r in ok)
    last = max(r["arrival_unix"] + r["last_actual_s"] for r in ok)
    return {
        "ttft_ms": statistics.fmean(r["ttft_actual_s"] for r in ok) * 1000,
        "tpot_ms": statistics.fmean(
            (r["last_actual_s"] - r["ttft_actual_s"]) / (r["completion_tokens"] - 1) for r in ok
        )
        * 1000,
        "output_throughput": sum(r["completion_tokens"] for r in ok) / (last - first),
        "tokens": sum(r["completion_tokens"] for r in ok),
    }


@pytest.mark.parametrize(
    ("concurrency", "requests", "endpoint", "client"),
    [(1, 6, "completions", "aiohttp"), (4, 16, "chat", "aiohttp"), (4, 16, "completions", "httpx")],
)
def test_throughput_and_ttft_agree_with_the_ground_truth(
    twins: TwinFactory, concurrency: int, requests: int, endpoint: str, client: str
) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    result = run_load(
        spec(twin.base, concurrency=concurrency, num_requests=requests, endpoint=endpoint, client=client)
    )
    m = result.metrics
    truth = truth_figures(measured_truth(twin, requests))
    assert m["completed"] == requests
    assert m["failed"] == 0
    assert m["total_output_tokens"] == truth["tokens"] == requests * OUTPUT_LEN
    assert m["output_tokens_source"] == "usage"
    assert m["total_input_tokens"] == requests * 512  # the chat template's overhead calibrated away
    # The client sees the server's TTFT plus the network and its own reading: a little more.
    assert truth["ttft_ms"] - 2 <= m["mean_ttft_ms"] <= truth["ttft_ms"] * 1.10 + 5
    assert m["mean_tpot_ms"] == pytest.approx(truth["tpot_ms"], rel=0.05)
    assert m["output_throughput"] == pytest.approx(truth["output_throughput"], rel=0.05)
    # whether the client was the limit depends on this machine's load; that it was judged does not
    assert result.health.figures["cpu_util"] >= 0 and "loop_lag_limit_ms" in result.health.figures
    assert result.health.figures["events"] >= requests * OUTPUT_LEN


def test_failing_requests_are_counted_and_grouped(twins: TwinFactory) -> None:
    twin = twins.start(scenario=slowed(request_failure_fraction=0.3))
    twin.wait_ready()
    result = run_load(spec(twin.base, concurrency=4, num_requests=30))
    truth = measured_truth(twin, 30)
    failed = sum(1 for r in truth if r["failed"])
    m = result.metrics
    assert 0 < failed < 30
    assert m["failed"] == failed
    assert m["completed"] == 30 - failed
    assert m["errors"] == {
        "Internal server error: the scheduler failed while processing this request.": failed
    }
    assert m["total_output_tokens"] == m["completed"] * OUTPUT_LEN  # failed ones count nowhere


def test_a_starved_client_is_marked_client_bound(twins: TwinFactory) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    # 3 ms of extra CPU per streamed event; 8 streams at ~55 events/s need ~1.3 cores.
    result = run_load(spec(twin.base, concurrency=8, num_requests=16, extra_cost_us=3000))
    assert result.client_bound
    assert any("of the time" in reason for reason in result.health.reasons), result.health.reasons
    figures = result.health.figures
    assert max(figures["cpu_util"], figures["busy"]) >= 0.85
    assert result.to_json()["client_bound"] is True


def test_open_loop_poisson_is_seeded_and_on_time(twins: TwinFactory) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    runs = [run_load(spec(twin.base, concurrency=None, request_rate=20.0, num_requests=20)) for _ in range(2)]
    offsets = [
        [round(r.scheduled - rec[0].scheduled, 9) for r in rec] for rec in (run.records for run in runs)
    ]
    assert offsets[0] == offsets[1]  # the same seed, the same arrival schedule
    gaps = [b - a for a, b in itertools.pairwise(offsets[0])]
    assert 0.02 < statistics.fmean(gaps) < 0.1  # mean 1/20 s
    for run in runs:
        assert run.metrics["completed"] == 20
        assert "p90_dispatch_delay_ms" in run.metrics  # its size is the machine's load, not the code's


def test_a_level_by_duration_stops_sending_at_the_deadline(twins: TwinFactory) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    result = run_load(spec(twin.base, concurrency=2, num_requests=None, duration_s=1.5))
    started = [r.send - result.records[0].scheduled for r in result.records]
    assert max(started) < 1.5
    assert result.metrics["completed"] == len(result.records) >= 4


async def test_the_callers_event_loop_stays_free(twins: TwinFactory) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    try:
        result = await run_load_async(spec(twin.base, concurrency=4, num_requests=8))
    finally:
        task.cancel()
    assert result.metrics["completed"] == 8
    # the loop kept ticking while the load ran (how promptly is the machine's load, not asserted)
    assert len(ticks) >= 3 and ticks[-1] > ticks[0]  # a blocked loop would tick once


def test_an_unreachable_server_fails_with_one_clear_error(twins: TwinFactory) -> None:
    with pytest.raises(LoadError, match="cannot read a model id"):
        run_load(LoadSpec(base_url="http://127.0.0.1:9", num_requests=1))


def test_the_cli_end_to_end_table_json_chart_and_comparison(twins: TwinFactory, tmp_path: Path) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    env = twin_config(
        tmp_path,
        twin,
        "small",
        f"""[bench.small]
concurrency = [1, 4]
input_len = 256
output_len = {OUTPUT_LEN}
num_requests = 4
repeats = 3
warmup_requests = 1
""",
    )
    assert flagbot("db", "upgrade", cwd=tmp_path, env=env).returncode == 0
    chart = tmp_path / "bench.png"
    table = flagbot("bench", "--chart", str(chart), cwd=tmp_path, env=env)
    assert table.returncode == 0, table.stderr
    assert "measurement set #1: twin, profile small, backend builtin" in table.stdout
    assert "out tok/s" in table.stdout
    assert "stored as measurement set #1" in table.stdout
    assert table.stderr.count("repeat") == 6  # progress: 2 levels x 3 repeats
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    second = flagbot("bench", "concurrency=1,4", "repeats=3", "compare-to=1", "--json", cwd=tmp_path, env=env)
    assert second.returncode == 0, second.stderr
    data = json.loads(second.stdout)
    assert data["set_id"] == 2
    assert data["backend"] == "builtin"
    assert [(m["concurrency"], m["repeat"]) for m in data["measurements"]] == [
        (1, 0), (4, 0), (1, 1), (4, 1), (1, 2), (4, 2)
    ]  # fmt: skip
    first = data["measurements"][0]
    assert first["metrics"]["completed"] == 4
    assert first["metrics"]["output_throughput"] > 0
    assert isinstance(first["metrics"]["client"]["client_bound"], bool)  # judged; its value is the load's
    assert data["comparison"]["verdict"] in ("improved", "regressed", "no effect", "undecided")

    refused = flagbot("bench", "compare-to=99", cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert "no measurement set" in refused.stderr
    wrong = flagbot("bench", "backend=vllm", cwd=tmp_path, env=env)
    assert wrong.returncode == 2
    assert "builtin, bench_serving" in wrong.stderr
