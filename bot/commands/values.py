"""Checks for flagbot's own option values (`limit=20`, `since=2h`, `week=2026-W48`)."""

from __future__ import annotations

import re
from datetime import date

from bot.commands.registry import Option, Positional
from bot.config.schema import parse_duration

_WEEK = re.compile(r"^(?P<year>\d{4})-W(?P<week>0[1-9]|[1-4]\d|5[0-3])$")
_ID = re.compile(r"^#?(?P<id>[1-9]\d{0,17})$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


LINE_BREAKS: dict[str, str] = {
    "\n": "a line feed (\\n)",
    "\r": "a carriage return (\\r)",
    "\v": "a vertical tab (\\v)",
    "\f": "a form feed (\\f)",
    "\x1c": "a file separator (U+001C)",
    "\x1d": "a group separator (U+001D)",
    "\x1e": "a record separator (U+001E)",
    "\x85": "a next-line character (U+0085)",
    "\u2028": "a line separator (U+2028)",
    "\u2029": "a paragraph separator (U+2029)",
}
"""Every character `str.splitlines()` breaks a line at: one inside a value would make one line of
a unit file, a `systemctl show` answer or a log line into two."""


def value_problem(value: str) -> str | None:
    """Why a flag or environment value cannot be written as one line (a line break, another
    control character, a lone surrogate), or None."""
    for char in value:
        code = ord(char)
        if char in LINE_BREAKS:
            return f"contains {LINE_BREAKS[char]}, a line break; a value must be one line"
        if code < 0x20 or 0x7F <= code <= 0x9F:
            return f"contains the control character U+{code:04X}"
        if 0xD800 <= code <= 0xDFFF:
            return f"contains a lone surrogate (U+{code:04X}), which is not text"
    return None


def check_option(option: Option, value: str) -> str:
    """Return the value in its canonical text form, or raise ValueError saying what is expected."""
    if option.kind == "int":
        if not re.fullmatch(r"[1-9]\d{0,8}", value):
            raise ValueError("expected a positive whole number")
        return value
    if option.kind == "id":
        match = _ID.match(value)
        if not match:
            raise ValueError("expected an id such as 12")
        return match["id"]
    if option.kind == "duration":
        parse_duration(value)
        return value
    if option.kind == "week":
        match = _WEEK.match(value)
        try:
            if not match:
                raise ValueError(value)
            date.fromisocalendar(int(match["year"]), int(match["week"]), 1)
        except ValueError:
            raise ValueError("expected an ISO week such as 2026-W48 (and one that exists)") from None
        return value
    if option.kind == "choice":
        if value not in option.choices:
            raise ValueError(f"expected one of {', '.join(option.choices)}")
        return value
    if option.kind == "list":
        parts = [part.strip() for part in value.split(",")]
        if not parts or not all(re.fullmatch(r"[1-9]\d{0,5}", part) for part in parts):
            raise ValueError("expected comma-separated positive numbers, e.g. 1,16,64")
        return ",".join(parts)
    if not value:
        raise ValueError("expected a value")
    return value


def check_positional(slot: Positional, value: str) -> str:
    """Ids are numbers (`12` or `#12`), names are lower-case words, choices are choices.

    An id slot with choices takes either (`revert 12`, `revert baseline`).
    """
    if slot.kind == "id":
        if value in slot.choices:
            return value
        match = _ID.match(value)
        if not match:
            words = "".join(f" or `{choice}`" for choice in slot.choices)
            raise ValueError(f"expected an id such as 12{words}")
        return match["id"]
    if slot.choices and value not in slot.choices:
        raise ValueError(f"expected one of {', '.join(slot.choices)}")
    if slot.kind == "name" and not _NAME.match(value):
        raise ValueError("expected a name of lower-case letters, digits, '-' and '_'")
    return value
