"""The digest's chart: effective capacity and output throughput over the week, changes marked.

Top: effective `max_running_requests` per target as a step line (a value holds until the next
start changes it; the line begins with the last start before the week). Bottom: each benchmark's
peak output tok/s, with the baseline's as a dotted line. Every experiment is a vertical line through both, red for a regression or a
failure, green for an improvement, grey otherwise, labelled `#id` while there are few enough to
read (and a tick along the top, not a line, in a week of hundreds). Drawn with matplotlib's Agg canvas on a private Figure (no pyplot state), so it is safe
to render off the event loop in a worker thread.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from bot.digest.model import Digest
from bot.digest.week import zone

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.dates import DateFormatter, DayLocator

__all__ = ["render_chart_png", "thin"]

Point = tuple[datetime, float]

GOOD = frozenset({"improved", "pass", "found"})
BAD = frozenset({"regressed", "fail", "failed-to-start"})
MAX_LABELS = 40
"""Above this many experiments the marks are drawn without their `#id` labels (unreadable)."""
MAX_LINES = 300
"""Above this many, each experiment is a tick along the top instead of a line through the panels."""
WIDTH_IN, DPI = 11, 100
MARGINS = {"left": 0.09, "right": 0.955, "bottom": 0.095, "top": 0.93, "hspace": 0.08}
"""Where the two panels sit in the figure (fractions): room for the two-line y labels on the left,
half a day label on the right, the week's label below and the title above."""
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
SECONDS_PER_DAY = DAY.total_seconds()
BUCKETS = WIDTH_IN * DPI
"""Pixel columns of the whole figure (the axes have fewer): a series with more points than this
is thinned to the few per column that can show (`thin`); a normal week is drawn point for point."""


def _colour(verdict: str | None) -> str:
    if verdict in BAD:
        return "tab:red"
    return "tab:green" if verdict in GOOD else "0.55"


def render_chart_png(digest: Digest, *, now: datetime | None = None) -> bytes | None:
    """The chart as PNG bytes; None when the week has nothing to draw (no start, no benchmark, no change)."""
    chart = digest.chart
    if chart.empty:
        return None
    # deferred: matplotlib costs ~0.35 s; the CLI and the bot load this module, only a drawn chart needs it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import DateFormatter, DayLocator, get_epoch  # deferred: matplotlib, as above
    from matplotlib.figure import Figure  # deferred: matplotlib, as above

    tz = zone(digest.timezone)
    until = min(digest.end, now or datetime.now(UTC))
    # Fixed margins, not layout="constrained": the figure's size and its labels never change, and
    # the constrained layout drew the whole figure twice (a third of a 10,000-experiment digest).
    figure = Figure(figsize=(WIDTH_IN, 6.2), dpi=DPI)
    figure.subplots_adjust(**MARGINS)
    FigureCanvasAgg(figure)
    cap_ax, tp_ax = figure.subplots(2, 1, sharex=True)
    for ax in (cap_ax, tp_ax):
        ax.xaxis_date(tz)  # x values are matplotlib date numbers (`days`), shown in the digest's zone
    epoch = datetime.fromisoformat(get_epoch()).replace(tzinfo=UTC)  # type: ignore[no-untyped-call]  # returns str
    days = days_since((EPOCH - epoch) / DAY)
    for index, (name, every) in enumerate(sorted(chart.capacity.items())):  # same colour per target below
        points = thin(every, digest.start, digest.end)
        xs = days(at for at, _ in points)
        ys = [value for _, value in points]
        if until > points[-1][0]:
            xs.append(days([until])[0])
            ys.append(ys[-1])
        cap_ax.step(xs, ys, where="post", color=f"C{index}", linewidth=2, label=name)
        cap_ax.plot(xs[: len(points)], ys[: len(points)], "o", color=f"C{index}", markersize=4)
    colours = {name: f"C{index}" for index, name in enumerate(sorted(chart.capacity))}
    for name in sorted(set(chart.throughput) | set(chart.reference)):
        colour = colours.setdefault(name, f"C{len(colours)}")
        points = thin(chart.throughput.get(name, []), digest.start, digest.end)
        if points:
            xs = days(at for at, _ in points)
            tp_ax.plot(xs, [value for _, value in points], "-o", color=colour, markersize=4, label=name)
        if name in chart.reference:
            tp_ax.axhline(
                chart.reference[name], color=colour, linestyle=":", linewidth=1.2, label=f"{name} baseline"
            )
    _marks(cap_ax, tp_ax, digest, days)
    _axes(cap_ax, tp_ax, digest, tz, DateFormatter, DayLocator)
    figure.suptitle(f"{digest.title()}: effective capacity and output throughput", fontsize=11)
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def days_since(epoch_days: float) -> Callable[[Iterable[datetime]], list[float]]:
    """Datetimes to matplotlib date numbers (days since its epoch), as `date2num` gives them.
    Why not `date2num` on each series: it converts aware datetimes one by one through
    `replace`/`astimezone`, a fifth of a 10,000-experiment chart; a timestamp divided by a day is
    the same number (tests/unit/digest/test_digest_chart.py holds the two equal)."""

    def days(moments: Iterable[datetime]) -> list[float]:
        return [epoch_days + at.timestamp() / SECONDS_PER_DAY for at in moments]

    return days


def _marks(
    cap_ax: Axes, tp_ax: Axes, digest: Digest, days: Callable[[Iterable[datetime]], list[float]]
) -> None:
    marks = digest.chart.marks
    if len(marks) > MAX_LINES:  # a rug of ticks along the top: thousands of lines would be a wall
        for colour, moments in _ticks(digest).items():
            xs = days(moments)
            for ax in (cap_ax, tp_ax):
                ax.plot(
                    xs,
                    [0.97] * len(xs),
                    "|",
                    color=colour,
                    markersize=8,
                    transform=ax.get_xaxis_transform(),
                )
        return
    for ax in (cap_ax, tp_ax):
        if marks:
            ax.vlines(
                days(at for at, _, _ in marks),
                0,
                1,
                transform=ax.get_xaxis_transform(),
                colors=[_colour(verdict) for _, _, verdict in marks],
                linestyles="dashed",
                linewidth=1,
                alpha=0.8,
            )
    if len(marks) <= MAX_LABELS:
        for at, label, verdict in marks:
            cap_ax.text(
                days([at])[0],
                0.98,
                f" {label} {verdict or ''}".rstrip(),
                transform=cap_ax.get_xaxis_transform(),
                rotation=90,
                va="top",
                ha="right",
                fontsize=7,
                color=_colour(verdict),
            )


def thin(points: Sequence[Point], start: datetime, end: datetime, buckets: int = BUCKETS) -> list[Point]:
    """`points` (in time order) as drawn: unchanged up to `buckets` points; beyond, each of
    `buckets` equal slices of [start, end) keeps its first, lowest, highest and last point, in
    time order. Why: a pixel column shows no more than where its line enters, its extremes and
    where it leaves, and drawing 100,000 points cost seconds; a dip or a spike is never lost."""
    if len(points) <= buckets:
        return list(points)
    origin, span = start.timestamp(), (end - start).total_seconds() / buckets
    kept: list[Point] = []
    slice_of = -1
    group: list[Point] = []
    for point in points:
        index = min(max(int((point[0].timestamp() - origin) // span), 0), buckets - 1)
        if index != slice_of and group:
            kept += _ends_and_extremes(group)
            group = []
        slice_of = index
        group.append(point)
    kept += _ends_and_extremes(group)
    return kept


def _ends_and_extremes(group: list[Point]) -> list[Point]:
    low = min(range(len(group)), key=lambda k: group[k][1])
    high = max(range(len(group)), key=lambda k: group[k][1])
    return [group[k] for k in sorted({0, low, high, len(group) - 1})]


def _ticks(digest: Digest) -> dict[str, list[datetime]]:
    """colour -> the moments of its experiment ticks, one per pixel column (ticks of one colour
    in one column are drawn on top of each other)."""
    origin = digest.start.timestamp()
    span = (digest.end - digest.start).total_seconds() / BUCKETS
    seen: set[tuple[str, int]] = set()
    ticks: dict[str, list[datetime]] = {}
    for at, _, verdict in digest.chart.marks:
        colour = _colour(verdict)
        column = (colour, int((at.timestamp() - origin) // span))
        if column not in seen:
            seen.add(column)
            ticks.setdefault(colour, []).append(at)
    return dict(sorted(ticks.items()))


def _axes(
    cap_ax: Axes,
    tp_ax: Axes,
    digest: Digest,
    tz: ZoneInfo,
    formatter: type[DateFormatter],
    locator: type[DayLocator],
) -> None:
    start, end = digest.start.astimezone(tz), digest.end.astimezone(tz)
    cap_ax.set_ylabel("max_running_requests\n(effective)")
    tp_ax.set_ylabel("output tok/s\n(peak level)")
    for ax, has in (
        (cap_ax, digest.chart.capacity),
        (tp_ax, {**digest.chart.throughput, **digest.chart.reference}),
    ):
        ax.grid(True, alpha=0.3)
        ax.set_xlim(start, end)  # type: ignore[arg-type]  # datetimes, through the date axis's converter
        if any(has.values()):
            ax.legend(fontsize=8, loc="lower left")
        else:
            ax.text(0.5, 0.5, "nothing recorded this week", transform=ax.transAxes, ha="center", color="0.4")
    cap_ax.set_ylim(bottom=0)
    tp_ax.set_ylim(bottom=0)
    tp_ax.xaxis.set_major_locator(locator(tz=tz))
    tp_ax.xaxis.set_major_formatter(formatter("%a %d %b", tz=tz))
    tp_ax.set_xlabel(f"{digest.week} ({digest.timezone})")
