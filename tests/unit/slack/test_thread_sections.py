"""Which reply of a thread each block goes in: by the step that emitted it, a chart and the
capacity comparison by their kind; a long table as a file."""

from __future__ import annotations

import pytest

from bot.slack.thread_sections import LONG_TABLE_ROWS, long_table_file, section_of
from bot.target.evidence import ChartBlock, MetricComparison, TableBlock, TextBlock

NOTE = TextBlock("a sentence")


@pytest.mark.parametrize(
    ("step", "part"),
    [
        (None, "preflight"),  # before the first step: which flag list judged the flags
        ("heal", "preflight"),
        ("preflight", "preflight"),
        ("apply", "change"),
        ("await_start", "start"),
        ("measure before", "benchmark"),
        ("compare", "details"),
        ("propose", "details"),
        ("settle unfinished runs", "preflight"),
        ("rollback", "start"),
        ("benchmark (profile quick, bench_serving)", "benchmark"),
        ("compare with set #3", "details"),
        ("my_own_step", "details"),
    ],
)
def test_a_block_goes_to_the_part_of_its_step(step: str | None, part: str) -> None:
    assert section_of(step, NOTE) == part


def test_a_chart_and_the_capacity_comparison_go_by_their_kind() -> None:
    assert section_of("compare", ChartBlock("Benchmark: before vs after", "/x.png")) == "benchmark"
    assert section_of("compare", MetricComparison("Capacity: before vs after", ())) == "start"


def test_only_a_long_table_becomes_a_file_with_every_row() -> None:
    short = TableBlock("Flags", ("flag",), tuple((f"--f{i}",) for i in range(LONG_TABLE_ROWS)))
    assert long_table_file(short) is None and long_table_file(NOTE) is None
    long = TableBlock(
        "Flags on each node", ("flag",), tuple((f"--f{i}",) for i in range(LONG_TABLE_ROWS + 1))
    )
    upload = long_table_file(long)
    assert upload is not None and upload.filename == "flags_on_each_node.txt"
    assert all(f"--f{i}" in upload.content for i in range(LONG_TABLE_ROWS + 1))
