"""Checks for flagbot's own option values (`limit=20`, `since=2h`, `week=2026-W48`).

Every check is complete here, at parse time (before Slack's acknowledgement): a value that
passes converts without raising wherever the application uses it (`int()`, a `timedelta`, a
date of the week, an id in a 32-bit database column). So numbers are ASCII digits and bounded
(each option's `maximum`, or the defaults below), durations are bounded, weeks lie in years
2000 to 2100, ids fit PostgreSQL's `integer`. docs/commands.md lists the limits.
"""

from __future__ import annotations

import re
from datetime import date

from bot.commands.registry import DAY_S, Option, Positional

MAX_ID = 2**31 - 1
"""The largest id: the primary keys are `integer` columns (32 bits in PostgreSQL)."""
MAX_INT = 1_000_000
"""An `int` option without its own maximum."""
MAX_DURATION_S = 366 * DAY_S
"""A `duration` option without its own maximum."""
MAX_LIST_ITEMS = 16
WEEK_YEARS = (2000, 2100)
_WEEK = re.compile(r"^(?P<year>\d{4})-W(?P<week>0[1-9]|[1-4]\d|5[0-3])$", re.ASCII)
_ID = re.compile(r"^#?(?P<id>[1-9]\d{0,17})$", re.ASCII)
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_INT = re.compile(r"^[1-9]\d{0,8}$", re.ASCII)
_DURATION = re.compile(r"^(?P<number>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h|d)?$", re.ASCII)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": float(DAY_S), None: 1.0}


def check_option(option: Option, value: str) -> str:
    """Return the value in its canonical text form, or raise ValueError saying what is expected."""
    if option.kind == "int":
        return str(_bounded_int(value, option.maximum or MAX_INT, "a positive whole number"))
    if option.kind == "id":
        if value in option.choices:
            return value
        try:
            return check_id(value)
        except ValueError as exc:
            raise ValueError(f"{exc}{''.join(f' or `{choice}`' for choice in option.choices)}") from None
    if option.kind == "duration":
        check_duration(value, option.maximum or MAX_DURATION_S)
        return value
    if option.kind == "week":
        return _week(value)
    if option.kind == "choice":
        if value not in option.choices:
            raise ValueError(f"expected one of {', '.join(option.choices)}")
        return value
    if option.kind == "list":
        parts = [part.strip() for part in value.split(",")]
        if len(parts) > MAX_LIST_ITEMS:
            raise ValueError(f"at most {MAX_LIST_ITEMS} numbers, got {len(parts)}")
        maximum = option.maximum or MAX_INT
        numbers = [
            _bounded_int(part, maximum, "comma-separated positive numbers, e.g. 1,16,64") for part in parts
        ]
        return ",".join(str(number) for number in numbers)
    if not value:
        raise ValueError("expected a value")
    return value


def _bounded_int(text: str, maximum: int, expected: str) -> int:
    if not _INT.match(text):
        raise ValueError(f"expected {expected}")
    number = int(text)
    if number > maximum:
        raise ValueError(f"at most {maximum}")
    return number


def check_id(value: str) -> str:
    """`12` or `#12` -> `12`: a number from 1 to MAX_ID."""
    match = _ID.match(value)
    if not match:
        raise ValueError("expected an id such as 12")
    if int(match["id"]) > MAX_ID:
        raise ValueError(f"an id is at most {MAX_ID}")
    return match["id"]


def check_duration(value: str, maximum_s: int) -> float:
    """Seconds of `90`, `90s`, `10m`, `24h`, `7d`, `500ms`, at most `maximum_s` (ValueError naming it)."""
    match = _DURATION.match(value)
    if not match:
        raise ValueError("not a duration; write e.g. 90s, 10m, 2h or 7d")
    seconds = float(match["number"]) * _UNIT_S[match["unit"]]
    if seconds > maximum_s:
        raise ValueError(f"at most {_duration_text(maximum_s)}")
    return seconds


def _duration_text(seconds: int) -> str:
    for unit, size in (("d", DAY_S), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _week(value: str) -> str:
    match = _WEEK.match(value)
    try:
        if not match:
            raise ValueError(value)
        date.fromisocalendar(int(match["year"]), int(match["week"]), 1)
    except ValueError:
        raise ValueError("expected an ISO week such as 2026-W48 (and one that exists)") from None
    low, high = WEEK_YEARS
    if not low <= int(match["year"]) <= high:
        raise ValueError(f"expected a week of a year from {low} to {high}")
    return value


def check_positional(slot: Positional, value: str) -> str:
    """Ids are numbers (`12` or `#12`), names are lower-case words, choices are choices.

    An id slot with choices takes either (`revert 12`, `revert baseline`).
    """
    if slot.kind == "id":
        if value in slot.choices:
            return value
        try:
            return check_id(value)
        except ValueError as exc:
            words = "".join(f" or `{choice}`" for choice in slot.choices)
            raise ValueError(f"{exc}{words}") from None
    if slot.choices and value not in slot.choices:
        raise ValueError(f"expected one of {', '.join(slot.choices)}")
    if slot.kind == "name" and not _NAME.match(value):
        raise ValueError("expected a name of lower-case letters, digits, '-' and '_'")
    return value
