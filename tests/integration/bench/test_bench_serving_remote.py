"""Remote bench_serving through the real SSH path, on a testbed node running the twin.

Node 0 has the twin's stand-in `sglang.bench_serving` (lab/flagbot_lab/twin/engine/bench_client.py behind the shim):
a real client that sends its requests to the twin and writes 0.5.10's printed block and JSON
keys. flagbot runs it with `NodeSession.run("bench-serving", ...)` as the unprivileged `ops`
user, reads the output file back and removes it; the twin's ground truth on the node says what
really happened. The built-in generator, from the host, measures the same server for comparison.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.bench.loadgen import LoadSpec, run_load_async
from bot.bench.remote import run_remote
from bot.bench.run import BenchPlan, run_plan
from bot.config.schema import BenchProfile, BenchServingCommand
from bot.store import Store
from bot.store.bench_repo import load_set
from bot.target.ssh import NodeSession
from flagbot_lab.testbed import OPS_USER, UNIT, Testbed
from tests.component.test_cli import flagbot

pytestmark = pytest.mark.asyncio(loop_scope="session")

LOCAL = "http://127.0.0.1:30000"
"""The URL bench_serving uses on node 0 itself."""


@pytest_asyncio.fixture(loop_scope="session")
async def node0(testbed: Testbed) -> AsyncIterator[NodeSession]:
    session = NodeSession(
        testbed.addresses[0],
        unit=UNIT,
        username=OPS_USER,
        key_path=testbed.client_key,
        known_hosts=testbed.known_hosts,
        command_timeout=120,
    )
    try:
        yield session
    finally:
        await session.close()


async def truth(testbed: Testbed, output_len: int, expected: int) -> list[dict[str, Any]]:
    """Node 0's ground-truth records of requests for `output_len` tokens (flushed once a second)."""
    path = Path(testbed.layout.root(0)) / "var/lib/sglang-twin/truth.jsonl"
    deadline = time.monotonic() + 20
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        records = [json.loads(line) for line in lines if line]
        found = [
            r
            for r in records
            if r.get("kind") == "request" and r.get("max_new") == output_len and not r.get("warmup")
        ]
        if len(found) >= expected or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.1)


async def test_bench_serving_runs_on_node0_and_reads_back_as_flagbots_result(
    testbed: Testbed, node0: NodeSession
) -> None:
    spec = LoadSpec(
        base_url=LOCAL, input_len=128, output_len=24, num_requests=8, concurrency=4, warmup_requests=1
    )
    result = await run_remote(node0, spec, command=BenchServingCommand(), base_url=LOCAL, timeout_s=120)
    m = result.metrics
    assert result.source == "bench_serving"
    assert m["backend"] == "sglang-oai"
    assert m["completed"] == 8
    assert m["failed"] == 0
    assert m["total_output_tokens"] == 8 * 24
    assert m["max_concurrency"] == 4
    assert m["request_rate"] == "inf"
    assert m["max_itl_ms"] > 0  # from the printed block: the JSON line does not have it
    records = await truth(testbed, 24, 8 + 1)  # the eight measured and bench_serving's warmup
    measured = sorted(records, key=lambda r: r["arrival_unix"])[-8:]
    server_ttft = sum(r["ttft_actual_s"] for r in measured) / 8 * 1000
    assert server_ttft - 2 <= m["mean_ttft_ms"] <= server_ttft * 1.5 + 20
    # The output file is gone: reading it fails.
    leftover = await node0.run(
        "read-bench-output", check=False, bench_output="/tmp/flagbot-bench-" + "0" * 32 + ".jsonl"
    )
    assert leftover.exit_status != 0

    # flagbot's own generator, from the host, on the same server and load: the same decode speed.
    ours = await run_load_async(
        LoadSpec(
            base_url=testbed.base_url,
            input_len=128,
            output_len=24,
            num_requests=8,
            concurrency=4,
            warmup_requests=1,
        )
    )
    assert ours.metrics["completed"] == 8
    assert ours.metrics["median_tpot_ms"] == pytest.approx(m["median_tpot_ms"], rel=0.25)


async def test_a_profile_through_bench_serving_is_stored_like_the_builtin(
    testbed: Testbed, node0: NodeSession, tmp_path: Path
) -> None:
    store = Store.open(sqlite_path=tmp_path / "flagbot.db")
    store.upgrade()
    try:
        profile = BenchProfile(
            concurrency=[1, 2], input_len=64, output_len=8, num_requests=2, repeats=2, warmup_requests=1
        )
        plan = BenchPlan.build(
            target="twin", base_url=LOCAL, profile_name="tiny", profile=profile, backend="bench_serving"
        )
        run = await run_plan(plan, store=store, node=node0)
        loaded = load_set(store, run.set.id or 0)
        assert loaded is not None
        assert loaded.set.backend == "bench_serving"
        assert [(m.concurrency, m.repeat, m.source) for m in loaded.measurements] == [
            (1, 0, "bench_serving"), (1, 1, "bench_serving"), (2, 0, "bench_serving"), (2, 1, "bench_serving")
        ]  # fmt: skip
        assert [m.metrics["completed"] for m in loaded.measurements] == [2, 2, 4, 4]  # rounds x concurrency
        assert loaded.set.summary["levels"][0]["concurrency"] == 1
    finally:
        store.close()


async def test_the_cli_runs_bench_serving_on_the_targets_node(testbed: Testbed, tmp_path: Path) -> None:
    """`flagbot bench backend=bench_serving` with the testbed's own config: SSH as configured."""
    config = tmp_path / "flagbot.toml"
    config.write_text(
        testbed.config_path.read_text()
        + "\n[bench.tiny]\nconcurrency = [2]\ninput_len = 64\noutput_len = 8\nnum_requests = 4\n"
        "repeats = 1\nwarmup_requests = 1\n"
    )
    env = {"FLAGBOT_CONFIG": str(config)}
    assert flagbot("db", "upgrade", cwd=tmp_path, env=env).returncode == 0
    result = await asyncio.to_thread(
        flagbot, "bench", "profile=tiny", "backend=bench_serving", "--json", cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["backend"] == "bench_serving"
    [measurement] = data["measurements"]
    assert measurement["source"] == "bench_serving"
    assert measurement["metrics"]["completed"] == 4
    assert measurement["metrics"]["backend"] == "sglang-oai"
