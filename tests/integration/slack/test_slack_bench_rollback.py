"""`/flagbot bench` and `/flagbot rollback` through the Slack stand-in on the two-node testbed.

Each opens a thread with a status card: the benchmark (the small `probe` profile) under the
target's lease, its rows as a table and its chart as an image; the rollback restarts both
nodes on the known-good flags (none pinned in this fresh store: the vendor line) and says so.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.store.leases import current
from tests.integration.target.support_control import on_baseline  # noqa: F401
from tests.support.slack_bot import RunningBot

pytestmark = pytest.mark.asyncio(loop_scope="session")
CHANNEL = "C0FLAGBOT"


def card(bot: RunningBot, command: str) -> Any:
    found = [m for m in bot.standin.messages(CHANNEL) if m.text.startswith(f"flagbot {command}")]
    assert found, [m.text[:80] for m in bot.standin.messages(CHANNEL)]
    return found[-1]


@pytest.mark.usefixtures("on_baseline")
async def test_bench_and_rollback_run_in_threads_on_the_testbed(bot: RunningBot) -> None:
    standin, store = bot.standin, bot.services.store
    answer = await standin.slash("bench", user="U0OPER", channel=CHANNEL)
    assert (
        answer.status == 200
    )  # acked; how fast is bench/ack_latency.py's figure, not a bound a busy machine can break
    await bot.services.drain()
    bench = card(bot, "bench")
    assert "succeeded" in bench.text and "stored as measurement set #" in bench.text, bench.text
    replies = standin.thread(CHANNEL, bench.ts)[1:]
    table = str([r.blocks for r in replies if "Benchmark: set #" in str(r.blocks)])
    # the levels table, stacked (wider than a phone: `concurrency: 32` then its figures)
    assert "probe" in table and "out tok/s" in table and "concurrency: 32" in table, table[:1500]
    charts = [
        block
        for reply in replies
        for block in reply.blocks or []
        if block.get("type") == "image" and str(block.get("slack_file", {}).get("url", "")).endswith(".png")
    ]
    assert charts, replies  # the chart: an image block showing the uploaded file
    assert await store.run(current, store.store, "twin") is None  # the lease was given back

    answer = await standin.slash("rollback", user="U0OPER", channel=CHANNEL)
    assert (
        answer.status == 200
    )  # acked; how fast is bench/ack_latency.py's figure, not a bound a busy machine can break
    await bot.services.drain()
    rollback = card(bot, "rollback")
    assert "succeeded" in rollback.text and "back on the vendor ExecStart" in rollback.text, rollback.text
    assert "✅ 3. rollback" in str(rollback.blocks)
    assert len(standin.thread(CHANNEL, rollback.ts)) > 1  # its evidence, in the thread
