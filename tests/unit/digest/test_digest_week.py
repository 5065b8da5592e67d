"""ISO weeks on the team's clock: parsing, bounds in a time zone, DST, year boundaries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.app.digest import week_ended_before
from bot.digest.week import IsoWeek, WeekFormatError, parse_week

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("text", "week"), [("2026-W48", IsoWeek(2026, 48)), (" 2026-w01 ", IsoWeek(2026, 1))]
)
def test_parse(text: str, week: IsoWeek) -> None:
    assert parse_week(text) == week
    assert str(week) == text.strip().upper()


@pytest.mark.parametrize("text", ["2026-48", "2026W48", "26-W48", "2026-W4", "2026-W048", "", "last week"])
def test_malformed_weeks_name_the_expected_form(text: str) -> None:
    with pytest.raises(WeekFormatError, match=r"expected YYYY-Www, e\.g\. 2026-W48"):
        parse_week(text)


@pytest.mark.parametrize(("text", "weeks"), [("2025-W53", 52), ("2026-W00", 53), ("2026-W54", 53)])
def test_weeks_that_do_not_exist(text: str, weeks: int) -> None:
    with pytest.raises(WeekFormatError, match=f"does not exist.*has {weeks} weeks"):
        parse_week(text)


def test_bounds_are_monday_midnight_local_half_open() -> None:
    week = IsoWeek(2026, 48)
    start, end = week.start(BERLIN), week.end(BERLIN)
    assert start.astimezone(UTC) == datetime(2026, 11, 22, 23, 0, tzinfo=UTC)
    assert end.astimezone(UTC) == datetime(2026, 11, 29, 23, 0, tzinfo=UTC)
    assert IsoWeek.containing(end - timedelta(microseconds=1), BERLIN) == week
    assert IsoWeek.containing(end, BERLIN) == week.next()


def test_a_week_with_a_clock_change_is_an_hour_shorter_or_longer() -> None:
    spring, autumn = IsoWeek(2026, 13), IsoWeek(2026, 43)  # 29 Mar and 25 Oct 2026 in Europe/Berlin

    def length(week: IsoWeek) -> timedelta:  # in real time: a same-zone subtraction reads wall clocks
        return week.end(BERLIN).astimezone(UTC) - week.start(BERLIN).astimezone(UTC)

    assert length(spring) == timedelta(days=7, hours=-1)
    assert length(autumn) == timedelta(days=7, hours=1)


def test_the_same_instant_is_in_different_weeks_on_different_clocks() -> None:
    sunday_late_utc = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)
    assert IsoWeek.containing(sunday_late_utc, UTC) == IsoWeek(2026, 48)
    assert IsoWeek.containing(sunday_late_utc, BERLIN) == IsoWeek(2026, 49)
    with pytest.raises(ValueError, match="naive"):
        IsoWeek.containing(datetime(2026, 11, 29), UTC)


def test_previous_and_next_cross_years() -> None:
    assert IsoWeek(2027, 1).previous() == IsoWeek(2026, 53)
    assert IsoWeek(2026, 53).next() == IsoWeek(2027, 1)


def test_the_weekly_job_reports_the_week_that_just_ended() -> None:
    assert week_ended_before(datetime(2026, 11, 30, 8, 0, tzinfo=UTC), "Europe/Berlin") == IsoWeek(2026, 48)
    # 23:30 UTC on Sunday is already Monday in Berlin: week 48 has ended there, not in UTC
    late = datetime(2026, 11, 29, 23, 30, tzinfo=UTC)
    assert week_ended_before(late, "Europe/Berlin") == IsoWeek(2026, 48)
    assert week_ended_before(late, "UTC") == IsoWeek(2026, 47)
