"""Split a command text into words the way a shell would, after undoing what chat clients do to it.

Slack and phones turn quotes into typographic ones and `--` into an em dash; quotes are
mended silently (they are never meaningful), dashes are not (the user gets a hint instead,
because guessing a flag name is exactly the kind of silent change flagbot must not make).
"""

from __future__ import annotations

import shlex

_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'"})
MAX_COMMAND_CHARS = 4000


class CommandError(ValueError):
    """A command that cannot be run as written: the problem, the usage and a correct example."""

    def __init__(self, message: str, *, usage: str | None = None, example: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage
        self.example = example

    def render(self) -> str:
        """The text shown to the user (ephemerally in Slack, on stderr in the CLI)."""
        lines = [f"error: {self.message}"]
        if self.usage:
            lines.append(f"usage: {self.usage}")
        if self.example:
            lines.append(f"example: {self.example}")
        return "\n".join(lines)


def tokenize(text: str) -> list[str]:
    """Shell-style words; a quote left open, a NUL or an overlong text is a CommandError."""
    if "\x00" in text:
        raise CommandError("the command contains a NUL character")
    if len(text) > MAX_COMMAND_CHARS:
        raise CommandError(f"the command is {len(text)} characters long; the limit is {MAX_COMMAND_CHARS}")
    try:
        return shlex.split(text.translate(_QUOTES), comments=False, posix=True)
    except ValueError as exc:
        raise CommandError(f"cannot split the command into words: {exc} (a quote is not closed)") from None
