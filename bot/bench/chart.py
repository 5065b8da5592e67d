"""A PNG of a measurement set: throughput and latency percentiles against concurrency.

Left: output token throughput per level, the mean over repeats with each repeat as a dot (total
throughput would dwarf it with prompt tokens). Right: TTFT (median, p99) and ITL (median, p99), log scale, the same way. A client-bound
repeat is drawn as a red cross and named in the legend, so a curve that flattens because the
client gave out is not read as the server's knee. An optional reference set is drawn dashed in
grey behind the candidate (`--compare-to`). matplotlib's Agg backend: no display needed.

One figure is kept per process and cleared for each chart (`_kept_figure`), not made anew: the
Agg renderer lives on the figure's canvas, and matplotlib's mathtext parser caches its parses on
the renderer, so a new figure re-parsed every log-scale tick label (`10^{1}`, `2\times10^{1}`,
...) of every chart, and its text metrics cache started empty too. The PNG is the same, byte for
byte (tests/unit/bench/test_chart.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["preload", "render_chart"]

THROUGHPUT = (("output_throughput", "output tok/s"),)
FIGSIZE = (12, 4.6)
"""Inches; drawn at 110 dpi."""
_FIGURE_LOCK = threading.Lock()
"""Charts are drawn in threads (`asyncio.to_thread`); the kept figure draws one at a time."""
_figure: Figure | None = None

LATENCY = (
    ("median_ttft_ms", "TTFT p50"),
    ("p99_ttft_ms", "TTFT p99"),
    ("median_itl_ms", "ITL p50"),
    ("p99_itl_ms", "ITL p99"),
)


class Row(Protocol):
    """What the chart reads of one repeat; `Measurement` rows qualify."""

    @property
    def concurrency(self) -> int | None: ...
    @property
    def metrics(self) -> dict[str, Any]: ...
    @property
    def client_bound(self) -> bool: ...


def preload() -> None:
    """Import matplotlib (Agg) now: ~0.4 s the first time in a process, nothing after.

    The loop calls it in a thread while a restarted server loads, so the verdict step that
    draws the chart does not pay for the import on its own time."""
    # deferred: matplotlib costs ~0.4 s; the CLI and the bot load this module, only a chart needs it
    import matplotlib

    matplotlib.use("Agg")  # before pyplot is imported: no display needed
    import matplotlib.lines  # deferred: part of matplotlib's ~0.4 s, as above
    import matplotlib.pyplot  # deferred: part of matplotlib's ~0.4 s, as above


def _kept_figure() -> Figure:
    """The process's chart figure (made on first use; call with `_FIGURE_LOCK` held).

    A plain `Figure` on an Agg canvas, outside pyplot's figure registry: pyplot gives the same
    figure (its default class and the Agg canvas) but would keep it in its list of open figures."""
    global _figure
    if _figure is None:
        # deferred: matplotlib costs ~0.4 s, only a chart needs it (preload has it loaded by now)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure  # deferred: matplotlib, as above

        _figure = Figure(figsize=FIGSIZE)
        FigureCanvasAgg(_figure)
    return _figure


def _by_level(rows: Iterable[Row], key: str) -> dict[int, list[tuple[float, bool]]]:
    out: dict[int, list[tuple[float, bool]]] = {}
    for row in rows:
        value = row.metrics.get(key)
        if row.concurrency is None or not isinstance(value, int | float) or isinstance(value, bool):
            continue
        out.setdefault(row.concurrency, []).append((float(value), row.client_bound))
    return dict(sorted(out.items()))


def _plot(ax: Axes, rows: Sequence[Row], series: Sequence[tuple[str, str]], *, reference: bool) -> None:
    for index, (key, label) in enumerate(series):
        points = _by_level(rows, key)
        if not points:
            continue
        levels = list(points)
        means = [sum(v for v, _ in points[c]) / len(points[c]) for c in levels]
        if reference:
            ax.plot(levels, means, "--", color="0.6", linewidth=1.2, label=f"{label} (reference)")
            continue
        color = f"C{index}"
        ax.plot(levels, means, "-o", color=color, markersize=4, label=label)
        for level in levels:
            good = [v for v, bound in points[level] if not bound]
            bad = [v for v, bound in points[level] if bound]
            ax.scatter([level] * len(good), good, s=10, color=color, alpha=0.5, zorder=3)
            if bad:
                ax.scatter([level] * len(bad), bad, s=40, color="red", marker="x", zorder=4)


def render_chart(
    rows: Sequence[Row],
    path: Path,
    *,
    title: str,
    reference: Sequence[Row] = (),
    reference_title: str | None = None,
) -> Path:
    """Write the chart of `rows` (one per level and repeat) to `path` and return it."""
    preload()
    with _FIGURE_LOCK:
        figure = _kept_figure()
        figure.clear()
        try:
            _draw(figure, rows, path, title=title, reference=reference, reference_title=reference_title)
        finally:
            figure.clear()  # the chart's artists and data are not kept until the next chart
    return path


def _draw(
    figure: Figure,
    rows: Sequence[Row],
    path: Path,
    *,
    title: str,
    reference: Sequence[Row],
    reference_title: str | None,
) -> None:
    """Draw the chart on the cleared `figure` and save it to `path`."""
    from matplotlib.lines import Line2D  # deferred: matplotlib, as above (loaded by preload by now)

    left, right = figure.subplots(1, 2)
    # fixed margins: the layout engine measured every text extent, ~40 % of the drawing time
    figure.subplots_adjust(left=0.065, right=0.985, bottom=0.11, top=0.87, wspace=0.17)
    for ax, series, ylabel in ((left, THROUGHPUT, "tokens/s"), (right, LATENCY, "ms")):
        if reference:
            _plot(ax, reference, series, reference=True)
        _plot(ax, rows, series, reference=False)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        levels = sorted({r.concurrency for r in [*rows, *reference] if r.concurrency is not None})
        if levels:
            ax.set_xticks(levels, [str(level) for level in levels])
    right.set_yscale("log")
    # a fixed title height: the automatic one measures every tick label first (~20 ms)
    left.set_title("throughput", y=1.0)
    right.set_title("latency percentiles", y=1.0)
    for ax in (left, right):
        handles, labels = ax.get_legend_handles_labels()
        if any(r.client_bound for r in rows):
            handles.append(Line2D([], [], color="red", marker="x", linestyle="", label="client-bound repeat"))
            labels.append("client-bound repeat")
        ax.legend(handles, labels, fontsize=8, loc="best")
    suffix = f"  (dashed: {reference_title})" if reference and reference_title else ""
    figure.suptitle(title + suffix, fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
