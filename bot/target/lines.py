"""Node output split into lines at `\\n` only.

Why not `str.splitlines()`: it also breaks at `\\r`, `\\v`, `\\f`, `\\x1c`-`\\x1e`, U+0085, U+2028
and U+2029. systemctl, journalctl, nvidia-smi and SGLang end their lines with `\\n` and may carry
any of the others inside a value (an `Environment=` value, a flag value, a journal message): split
at them, one line becomes several, and a value of `systemctl show` could forge a line of its own
(`ActiveState=`, `NeedDaemonReload=`; docs/security.md, "One line is one line").
"""

from __future__ import annotations

__all__ = ["LINE_BREAKS", "lines_with_ends", "split_lines"]

LINE_BREAKS = ("\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
"""Every break `str.splitlines()` splits at; only the first ends a line of node output."""


def split_lines(text: str) -> list[str]:
    """The `\\n`-separated lines of `text`, without their `\\n`; no empty last line after a final `\\n`."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def lines_with_ends(text: str) -> list[str]:
    """`split_lines` with each line's `\\n` kept (the last one may have none): for `difflib`."""
    parts = text.split("\n")
    last = parts.pop()
    return [part + "\n" for part in parts] + ([last] if last else [])
