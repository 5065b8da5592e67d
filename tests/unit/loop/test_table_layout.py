"""Tables on a narrow screen: a table that fits stays a table, one that does not is stacked,
and neither has a line wider than the screen or a cell squeezed to one word per line."""

from __future__ import annotations

import pytest

from bot.loop.console import print_table, render_block
from bot.loop.table_layout import display_width, stacked_record
from bot.target.evidence import ComparisonRow, MetricComparison, TableBlock
from tests.support.narrow_tables import (
    HYPOTHESIS_COLUMNS,
    HYPOTHESIS_ROWS,
    TERMINAL,
    assert_readable,
    console,
    lines_of,
)


def test_a_record_packs_short_fields_and_wraps_long_text_on_words() -> None:
    lines = stacked_record(HYPOTHESIS_COLUMNS, HYPOTHESIS_ROWS[0], 60)
    assert lines[0] == "id: 12"
    assert all(display_width(line) <= 60 for line in lines)
    assert any(line.startswith("  statement: Raising --max-running-requests") for line in lines)
    assert "  variable: --max-running-requests" in "\n".join(lines)  # a flag is not broken at its dashes


def test_short_fields_share_a_line_up_to_the_width() -> None:
    columns = ("node", "state", "invocation", "NRestarts", "result")
    assert stacked_record(columns, ("gpu-a-0", "active/running", "12", "0", "success"), 60) == [
        "node: gpu-a-0",
        "  state: active/running · invocation: 12 · NRestarts: 0",
        "  result: success",
    ]


def test_a_record_leaves_out_empty_cells_and_leads_with_an_unnamed_mark() -> None:
    assert stacked_record(("", "metric", "verdict"), ("✗", "ttft", "regressed"), 60) == [
        "✗ metric: ttft",
        "  verdict: regressed",
    ]
    assert stacked_record(("node", "state", "result"), ("n0", "", "ok"), 60) == ["node: n0", "  result: ok"]


def test_a_word_longer_than_the_line_is_broken_inside() -> None:
    path = "/var/lib/flagbot/" + "x" * 120
    lines = stacked_record(("name", "source"), ("try", path), 40)
    assert all(display_width(line) <= 40 for line in lines)
    assert lines[1].startswith("  source: /var/lib/flagbot/")
    assert "".join(line.strip().removeprefix("source: ") for line in lines[1:]) == path


def test_a_table_that_fits_is_drawn_as_a_table() -> None:
    out = console()
    print_table(
        out, "flags", ("flag", "value"), [("--tp-size", "2"), ("--mem-fraction-static", "0.85")], right=(1,)
    )
    text = out.export_text()
    assert "┃ flag" in text and "│ --mem-fraction-static │  0.85 │" in text


@pytest.mark.parametrize("width", [TERMINAL, 60])
def test_the_hypothesis_table_is_stacked_on_a_narrow_terminal(width: int) -> None:
    out = console(width)
    print_table(out, "Hypotheses on gpu-a", HYPOTHESIS_COLUMNS, HYPOTHESIS_ROWS)
    lines = lines_of(out)
    assert lines[0] == "Hypotheses on gpu-a"
    assert_readable(lines, width, [cell for row in HYPOTHESIS_ROWS for cell in row])
    assert "id: 13" in lines


def test_rich_markup_in_a_cell_is_shown_as_written() -> None:
    out = console()
    print_table(out, "", ("statement",), [("[bold]not markup[/bold]",)])
    assert "[bold]not markup[/bold]" in out.export_text()


def test_evidence_tables_read_at_80_columns() -> None:
    implied = TableBlock(
        "Predicted implied flags",
        ("field", "value", "because of", "source"),
        (
            (
                "disable_piecewise_cuda_graph",
                "true",
                "--speculative-algorithm EAGLE",
                "python/sglang/srt/server_args.py _handle_piecewise_cuda_graph (0.5.10)",
            ),
        ),
        note="predicted from the knowledge base; the start's own server_args line decides",
    )
    comparison = MetricComparison(
        "before / after",
        (
            ComparisonRow(
                "median_ttft_ms@c=32", "123.4 ms", "337.6 ms", "+173.6% [-99.6%, +169014.3%]", "undecided"
            ),
            ComparisonRow(
                "output_throughput@c=32",
                "1,204.5 tok/s",
                "1,311.0 tok/s",
                "+8.8% [+6.1%, +11.5%]",
                "improved",
            ),
        ),
        note="3 repeats per level; change with its 95% interval",
    )
    for block, cells in (
        (implied, [cell for row in implied.rows for cell in row]),
        (comparison, [row.change for row in comparison.rows]),
    ):
        out = console()
        render_block(out, block)
        assert_readable(lines_of(out), TERMINAL, cells)
