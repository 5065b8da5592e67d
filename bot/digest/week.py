"""ISO weeks in the team's time zone: what "the week of 2026-W48" means to the digest.

Why a type and not two datetimes: a week is named the way people say it (`2026-W48`), starts
on Monday 00:00 *local* time (`schedules.timezone`), and is one hour shorter or longer when
the clocks change; the store keeps UTC, so the bounds are converted once, here, and every
query compares UTC instants with a half-open range `[start, end)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

__all__ = ["IsoWeek", "WeekFormatError", "parse_week"]

WEEK_FORM = "YYYY-Www, e.g. 2026-W48"
_WEEK = re.compile(r"^(\d{4})-[Ww](\d{2})$")


class WeekFormatError(ValueError):
    """A week that is not `YYYY-Www` or does not exist; the message names the expected form."""


@dataclass(frozen=True, order=True)
class IsoWeek:
    """One ISO 8601 week (Monday to Sunday), e.g. `IsoWeek(2026, 48)` is 2026-W48."""

    year: int
    week: int

    def __post_init__(self) -> None:
        try:
            date.fromisocalendar(self.year, self.week, 1)
        except ValueError:
            raise WeekFormatError(
                f"{self.year}-W{self.week:02d} does not exist (expected {WEEK_FORM}; "
                f"{self.year} has {_weeks_in(self.year)} weeks)"
            ) from None

    def __str__(self) -> str:
        return f"{self.year}-W{self.week:02d}"

    @classmethod
    def containing(cls, moment: datetime, tz: tzinfo) -> IsoWeek:
        """The week that `moment` (aware) falls in, as read on a clock in `tz`."""
        if moment.tzinfo is None:
            raise ValueError("naive datetime; give an aware one (datetime.now(UTC))")
        year, week, _ = moment.astimezone(tz).isocalendar()
        return cls(year, week)

    def monday(self) -> date:
        return date.fromisocalendar(self.year, self.week, 1)

    def previous(self) -> IsoWeek:
        year, week, _ = (self.monday() - timedelta(days=7)).isocalendar()
        return IsoWeek(year, week)

    def next(self) -> IsoWeek:
        year, week, _ = (self.monday() + timedelta(days=7)).isocalendar()
        return IsoWeek(year, week)

    def start(self, tz: tzinfo) -> datetime:
        """Monday 00:00 in `tz` (aware); the first instant of the week."""
        return datetime.combine(self.monday(), time(0), tzinfo=tz)

    def end(self, tz: tzinfo) -> datetime:
        """The next Monday 00:00 in `tz`: the first instant *after* the week (half-open)."""
        return self.next().start(tz)


def _weeks_in(year: int) -> int:
    return date(year, 12, 28).isocalendar()[1]


def parse_week(text: str) -> IsoWeek:
    """`2026-W48` (the `W` in either case) as an IsoWeek; WeekFormatError otherwise."""
    found = _WEEK.match(text.strip())
    if found is None:
        raise WeekFormatError(f"week {text!r} is not an ISO week; expected {WEEK_FORM}")
    return IsoWeek(int(found.group(1)), int(found.group(2)))


def zone(name: str) -> ZoneInfo:
    """The configured time zone (validated when flagbot.toml was read)."""
    return ZoneInfo(name)
