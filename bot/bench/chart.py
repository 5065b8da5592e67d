"""A PNG of a measurement set: throughput and latency percentiles against concurrency.

Left: output token throughput per level, the mean over repeats with each repeat as a dot (total
throughput would dwarf it with prompt tokens). Right: TTFT (median, p99) and ITL (median, p99), log scale, the same way. A client-bound
repeat is drawn as a red cross and named in the legend, so a curve that flattens because the
client gave out is not read as the server's knee. An optional reference set is drawn dashed in
grey behind the candidate (`--compare-to`). matplotlib's Agg backend: no display needed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["preload", "render_chart"]

THROUGHPUT = (("output_throughput", "output tok/s"),)
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
    import matplotlib.pyplot as plt  # deferred: matplotlib costs ~0.4 s, only a chart needs it
    from matplotlib.lines import Line2D  # deferred: matplotlib, as above (loaded by preload by now)

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    # fixed margins: the layout engine measured every text extent, ~40 % of the drawing time
    figure.subplots_adjust(left=0.065, right=0.985, bottom=0.11, top=0.87, wspace=0.17)
    try:
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
                handles.append(
                    Line2D([], [], color="red", marker="x", linestyle="", label="client-bound repeat")
                )
                labels.append("client-bound repeat")
            ax.legend(handles, labels, fontsize=8, loc="best")
        suffix = f"  (dashed: {reference_title})" if reference and reference_title else ""
        figure.suptitle(title + suffix, fontsize=11)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=110)
    finally:
        plt.close(figure)
    return path
