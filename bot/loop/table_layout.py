"""Tables laid out for a width: an 80-column terminal, a phone's Slack code block.

Why a layout of its own: a table too wide for its screen is unreadable either way. A terminal
library squeezes every column until each cell wraps one word per line, and Slack wraps a long
code line on a phone so the columns no longer line up. So a table that does not fit its width
is shown *stacked* instead: one record per row, its first cell on a line of its own and the
other cells as `column: value` under it, short ones packed side by side, long free text
wrapped on whole words with a hanging indent. Nothing is cut and no line is wider than the
screen. The CLI (`bot.loop.console`) and Slack (`bot.slack.render_tables`) share this layout,
so a row reads the same in both.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

FIELD_INDENT = "  "
"""Where a record's `column: value` lines start (its first cell is not indented)."""
WRAP_INDENT = "    "
"""Where the continuation of a wrapped value starts."""
FIELD_SEPARATOR = " · "
"""Between short `column: value` fields packed onto one line."""
EMPTY_CELLS = frozenset({""})
"""Cells left out of a stacked record (a `-` stays: it says "none", which is information)."""


def display_width(text: str) -> int:
    """Columns a monospace font gives `text` (wide CJK and emoji take two, combining marks none)."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def one_line(cell: str) -> str:
    """A cell's text on one line: newlines, tabs and runs of spaces become one space."""
    return " ".join(cell.split())


def _wrapped(text: str, width: int, first_indent: str) -> list[str]:
    """`text` on lines of at most `width` display columns (wide CJK and emoji count two),
    broken between words; a word longer than a line, such as a path, is broken inside, and a
    flag's dashes are no break points."""
    width = max(len(WRAP_INDENT) + 10, width)
    lines: list[str] = []
    current = first_indent
    for word in text.split():
        joined = f"{current} {word}" if current.strip() else current + word
        if display_width(joined) <= width:
            current = joined
            continue
        if display_width(WRAP_INDENT + word) <= width:  # fits a line of its own
            lines.append(current)
            current = WRAP_INDENT + word
            continue
        current += " " if current.strip() else ""  # too long for any line: broken from here on
        for char in word:
            if display_width(current + char) > width:
                lines.append(current.rstrip())
                current = WRAP_INDENT
            current += char
    if current.strip():
        lines.append(current)
    return lines or [first_indent.rstrip()]


def stacked_record(columns: Sequence[str], row: Sequence[str], width: int) -> list[str]:
    """One row as stacked lines no wider than `width`: `first-column: value`, then the other
    cells as `column: value`, short ones packed with ` · `, long ones wrapped on their own.
    Empty cells are left out; a cell under no column is shown bare."""
    names = [*columns, *([""] * (len(row) - len(columns)))]
    fields = [
        f"{name}: {one_line(cell)}" if name else one_line(cell)
        for name, cell in zip(names, row, strict=False)
        if one_line(cell) not in EMPTY_CELLS
    ]
    if len(fields) > 1 and names and not names[0] and row and one_line(row[0]):
        fields[:2] = [f"{fields[0]} {fields[1]}"]  # an unnamed mark (✗, ✓) leads the record's first line
    if not fields:
        return ["(empty row)"]
    lines = _wrapped(fields[0], width, "")
    current = ""
    for field in fields[1:]:
        candidate = f"{current}{FIELD_SEPARATOR}{field}" if current else f"{FIELD_INDENT}{field}"
        if display_width(candidate) <= width:
            current = candidate
            continue
        if current:
            lines.append(current)
        if display_width(FIELD_INDENT + field) <= width:
            current = FIELD_INDENT + field
        else:
            lines.extend(_wrapped(field, width, FIELD_INDENT))
            current = ""
    if current:
        lines.append(current)
    return lines


def stacked_records(columns: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[list[str]]:
    """Every row as a stacked record (`stacked_record`); no rows is one `(no rows)` record."""
    return [stacked_record(columns, row, width) for row in rows] or [["(no rows)"]]
