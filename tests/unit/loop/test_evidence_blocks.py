"""Every evidence kind reads back from its JSON and is rendered by the console reporter."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from bot.loop.report import ConsoleReporter, RunOutcome, RunStart
from bot.target.evidence import (
    ChartBlock,
    ComparisonRow,
    Evidence,
    JournalExcerpt,
    MetricComparison,
    TableBlock,
    TextBlock,
    VerdictBlock,
    evidence_from_json,
)

BLOCKS: list[Evidence] = [
    TextBlock("the server restarted in 41 s", title="restart"),
    TableBlock("flags", ("flag", "value"), (("--tp-size", "2"),), note="node 0"),
    JournalExcerpt(
        "fatal", "node0", "journalctl -u x", ("a", "KV cache pool is full"), 2, False, "KV cache pool is full"
    ),
    MetricComparison(
        "before / after",
        (ComparisonRow("max_running_requests", "48", "26", "-45.8 %", "regressed"),),
        note="3 repeats",
    ),
    ChartBlock("throughput by concurrency", "state/charts/12.png", alt="flat until 32"),
    VerdictBlock("regressed", "capacity fell from 48 to 26", ("effective max_running_requests 26",)),
]


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.kind)
def test_a_block_reads_back_from_its_json(block: Evidence) -> None:
    assert evidence_from_json(block.to_json()) == block


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown evidence kind 'audio'"):
        evidence_from_json({"kind": "audio"})


async def test_the_console_reporter_shows_every_kind_and_the_outcome() -> None:
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, width=200, color_system=None))
    await reporter.started(RunStart(12, "try", "t1", "alice", {}))
    await reporter.step(12, 1, "restart", "failed", "no GPU left")
    for block in BLOCKS:
        await reporter.evidence(block, 12)
    await reporter.finished(RunOutcome(12, "try", "t1", "succeeded", "regressed", "capacity fell"))
    text = out.getvalue()
    for expected in (
        "experiment #12: running playbook try on t1 for alice",
        "step 2 restart: failed - no GPU left",
        "the server restarted in 41 s",
        "--tp-size",
        "on node0: journalctl -u x",
        "max_running_requests",
        "-45.8 %",
        "chart: state/charts/12.png",
        "REGRESSED capacity fell from 48 to 26",
        "  effective max_running_requests 26",
        "experiment #12 succeeded: regressed - capacity fell",
    ):
        assert expected in text, expected
