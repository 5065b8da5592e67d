"""The Slack thread's benchmark table (bot/slack/thread_commands.py): a rate sweep's levels are
named `rate=R`, goodput gets a column when objectives were set, and the note says the workload."""

from __future__ import annotations

from bot.app.bench import BenchResult
from bot.bench.run import BenchPlan, BenchRun
from bot.config.schema import BenchProfile
from bot.slack.thread_commands import _bench_evidence
from bot.store.models import MeasurementSet
from bot.target.evidence import TableBlock


def level(rate: float, goodput: float | None) -> dict[str, object]:
    return {"concurrency": None, "request_rate": rate, "repeats": 2, "completed": 8, "failed": 0,
            "client_bound": 0, "output_throughput": 100.0, "goodput": goodput}  # fmt: skip


def table(levels: list[dict[str, object]], params: dict[str, object]) -> TableBlock:
    profile = BenchProfile(request_rates=[2.0, 8.0])
    plan = BenchPlan.build(target="t", base_url="http://x", profile_name="rates", profile=profile)
    mset = MeasurementSet(id=5, target="t", params=params, summary={"levels": levels})
    result = BenchResult(plan, BenchRun(mset, [], []), None, None, None, None, None)
    block = _bench_evidence(result)[0]
    assert isinstance(block, TableBlock)
    return block


def test_rate_levels_goodput_and_the_workload() -> None:
    block = table(
        [level(2.0, 1.5), level(8.0, 4.0)],
        {"dataset": "generated-shared-prefix (2 groups x 2 prompts)", "slo": "e2e_ms<=900"},
    )
    assert [row[0] for row in block.rows] == ["rate=2", "rate=8"]
    assert "goodput req/s" in block.columns
    assert block.rows[1][block.columns.index("goodput req/s")] == "4.0"
    assert "dataset generated-shared-prefix (2 groups x 2 prompts)" in block.note
    assert "goodput = requests/s meeting e2e_ms<=900" in block.note


def test_no_goodput_column_without_objectives() -> None:
    block = table([level(2.0, None)], {})
    assert "goodput req/s" not in block.columns
    assert "dataset random" in block.note
