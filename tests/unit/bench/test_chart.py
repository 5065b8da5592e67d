"""The benchmark chart drawn on the process's kept figure is the chart a fresh figure draws.

`bot.bench.chart` keeps one figure and clears it for each chart (its renderer's mathtext and
text caches then serve every later chart). Nothing of one chart may show in the next: each
PNG must be byte for byte the one pyplot's new figure gives, whatever was drawn before it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from bot.bench import chart


@dataclass(frozen=True)
class Row:
    concurrency: int | None
    metrics: dict[str, Any] = field(default_factory=dict)
    client_bound: bool = False


def rows(scale: float, *, bound: bool = False) -> list[Row]:
    return [
        Row(
            level,
            {
                "output_throughput": 90.0 * level * scale + repeat,
                "median_ttft_ms": 20.0 + level * scale,
                "p99_ttft_ms": 45.0 + level,
                "median_itl_ms": 5.0 + repeat,
                "p99_itl_ms": 9.0 + level * scale,
            },
            bound and level == 8 and repeat == 1,
        )
        for level in (1, 8, 64)
        for repeat in range(2)
    ]


def fresh(path: Path, data: list[Row], reference: list[Row], title: str) -> str:
    """The chart drawn as before the figure was kept: a new pyplot figure, closed after."""
    chart.preload()
    figure = plt.figure(figsize=chart.FIGSIZE)
    try:
        chart._draw(figure, data, path, title=title, reference=reference, reference_title="before (set #1)")
    finally:
        plt.close(figure)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kept(path: Path, data: list[Row], reference: list[Row], title: str) -> str:
    chart.render_chart(data, path, title=title, reference=reference, reference_title="before (set #1)")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_each_chart_on_the_kept_figure_is_the_fresh_figures_chart_byte_for_byte(tmp_path: Path) -> None:
    cases = [
        (rows(1.0), rows(1.0), "experiment #1: after (set #2)"),
        (rows(3.5, bound=True), [], "experiment #2: after (set #4)"),  # no reference, a bound repeat
        (rows(0.2), rows(2.0), "experiment #3: after (set #6)"),
        (rows(1.0), rows(1.0), "experiment #1: after (set #2)"),  # the first again, after the others
    ]
    for index, (data, reference, title) in enumerate(cases):
        want = fresh(tmp_path / f"fresh-{index}.png", data, reference, title)
        got = kept(tmp_path / f"kept-{index}.png", data, reference, title)
        assert got == want, f"chart {index} differs from a fresh figure's"


def test_the_kept_figure_is_left_empty_and_out_of_pyplots_figures(tmp_path: Path) -> None:
    before = plt.get_fignums()
    kept(tmp_path / "one.png", rows(1.0), rows(1.0), "experiment #1")
    assert plt.get_fignums() == before
    figure = chart._kept_figure()
    assert figure.axes == []
    assert figure.texts == []
