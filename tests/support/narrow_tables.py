"""What "a table reads on an 80-column terminal and on a phone" means, as assertions.

Why shared: the CLI tables (rich) and the Slack tables (code blocks) are held to the same two
rules, by the tests of each front end and of the layout itself.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console

from bot.loop.table_layout import display_width

TERMINAL = 80
"""The narrow terminal every CLI table is rendered at."""

HYPOTHESIS_COLUMNS = ("id", "status", "statement", "variable", "expects", "experiments")
HYPOTHESIS_ROWS = (
    (
        "12",
        "open",
        "Raising --max-running-requests from 48 to 64 lifts output throughput at c=32 without "
        "hurting TTFT p99, because the KV pool has room for 80 requests on the H200",
        "--max-running-requests",
        "output_throughput@c=32>=+5%, p99_ttft_ms@c=32<=+10%",
        "2",
    ),
    (
        "13",
        "refuted",
        "Enabling FlashInfer allreduce fusion switches piecewise CUDA graph off and lowers capacity",
        "--enable-flashinfer-allreduce-fusion",
        "max_running_requests>=48",
        "1",
    ),
)
"""A realistic hypothesis list: long statements, flag names and expectations."""


def console(width: int = TERMINAL) -> Console:
    """A recording console of `width` columns, without colour (the text is what is checked)."""
    return Console(width=width, record=True, color_system=None, highlight=False)


def lines_of(recorded: Console) -> list[str]:
    return recorded.export_text().splitlines()


def assert_readable(lines: list[str], width: int, cells: Iterable[str]) -> None:
    """No line wider than `width`, and no cell wrapped one word per line: the first three words
    of every long cell stand together on one line (a squeezed column has one word a line)."""
    too_wide = [line for line in lines if display_width(line) > width]
    assert not too_wide, f"wider than {width}: {too_wide}"
    flattened = [" ".join(line.replace("│", " ").replace("┃", " ").split()) for line in lines]
    for cell in cells:
        words = cell.split()
        if len(words) < 3:
            continue
        head = " ".join(words[:3])
        assert any(head in line for line in flattened), f"{head!r} is not on one line:\n" + "\n".join(lines)
