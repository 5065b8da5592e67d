"""bot/digest/chart.py's `thin`: a large week's series drawn as few points as its pixels can show,
a normal week's point for point; and its own date numbers are matplotlib's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from matplotlib.dates import date2num, get_epoch

from bot.digest.chart import BUCKETS, DAY, EPOCH, days_since, thin

START = datetime(2026, 11, 23, tzinfo=UTC)
END = START + timedelta(days=7)


def _series(n: int) -> list[tuple[datetime, float]]:
    step = (END - START) / n
    return [(START + step * k, float(48 - k % 3)) for k in range(n)]


def test_a_normal_week_is_drawn_point_for_point() -> None:
    points = _series(BUCKETS)
    assert thin(points, START, END) == points


def test_a_huge_series_keeps_at_most_four_points_a_column_and_every_extreme() -> None:
    points = _series(100_000)
    points[51_234] = (points[51_234][0], 5.0)  # one dip and one spike among 100,000
    points[77_777] = (points[77_777][0], 900.0)
    drawn = thin(points, START, END)
    assert len(drawn) <= 4 * BUCKETS
    assert (points[51_234] in drawn) and (points[77_777] in drawn)
    assert drawn[0] == points[0] and drawn[-1] == points[-1]
    assert [at for at, _ in drawn] == sorted(at for at, _ in drawn)  # still in time order
    assert set(drawn) <= set(points)  # nothing made up


def test_each_column_keeps_where_the_line_enters_and_leaves() -> None:
    column = (END - START) / 4
    points = [(START + column * c + timedelta(seconds=s), float(s)) for c in range(4) for s in range(1, 6)]
    drawn = thin(points, START, END, buckets=4)
    assert drawn == [p for p in points if p[1] in (1.0, 5.0)]  # per column: first (lowest), last (highest)


def test_the_charts_date_numbers_are_matplotlibs_in_any_zone() -> None:
    epoch = datetime.fromisoformat(get_epoch()).replace(tzinfo=UTC)  # type: ignore[no-untyped-call]
    days = days_since((EPOCH - epoch) / DAY)
    moments = [
        START,
        END - timedelta(microseconds=1),
        datetime(2026, 3, 29, 1, 30, tzinfo=ZoneInfo("Europe/Berlin")),  # the night clocks go forward
        datetime(2026, 11, 1, 1, 30, fold=1, tzinfo=ZoneInfo("America/New_York")),  # the repeated hour
        datetime(1999, 12, 31, 23, 59, 59, tzinfo=ZoneInfo("Asia/Kolkata")),
    ]
    theirs = [float(date2num(at)) for at in moments]  # type: ignore[no-untyped-call]
    ours = days(moments)
    assert [round(d, 9) for d in ours] == [round(d, 9) for d in theirs]
    assert ours[1] > ours[0]
