"""Split a command text into words the way a shell would, after undoing what chat clients do to it.

Slack and phones turn quotes into typographic ones and `--` into an em dash; quotes are
mended silently (they are never meaningful), dashes are not (the user gets a hint instead,
because guessing a flag name is exactly the kind of silent change flagbot must not make).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'"})
MAX_COMMAND_CHARS = 4000
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


class CommandError(ValueError):
    """A command that cannot be run as written: the problem, the usage and a correct example."""

    def __init__(
        self, message: str, *, usage: str | None = None, example: str | None = None, flag_list: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage
        self.example = example
        self.flag_list = flag_list
        """The refusal comes from the flag list the words were judged by (a flag it does not have,
        a value it refuses): another SGLang version's list could take them."""

    def render(self) -> str:
        """The text shown to the user (ephemerally in Slack, on stderr in the CLI)."""
        lines = [f"error: {self.message}"]
        if self.usage:
            lines.append(f"usage: {self.usage}")
        if self.example:
            lines.append(f"example: {self.example}")
        return "\n".join(lines)


def tokenize(text: str) -> list[str]:
    """Shell-style words; a quote left open, a NUL, an overlong text or a word that holds a
    control character, a line break or a lone surrogate (`check_words`) is a CommandError."""
    if "\x00" in text:
        raise CommandError("the command contains a NUL character")
    if len(text) > MAX_COMMAND_CHARS:
        raise CommandError(f"the command is {len(text)} characters long; the limit is {MAX_COMMAND_CHARS}")
    try:
        words = shlex.split(text.translate(_QUOTES), comments=False, posix=True)
    except ValueError as exc:
        raise CommandError(f"cannot split the command into words: {exc} (a quote is not closed)") from None
    check_words(words)
    return words


def check_words(words: Sequence[str]) -> None:
    """Every word is text that can go anywhere a value goes (a drop-in, an SSH argument, the
    database, a Slack message): CommandError naming the word and the character otherwise.

    Refused inside a word: a lone surrogate (it cannot be encoded as UTF-8; Slack's JSON can
    carry one as an escape, a CLI argument as undecodable bytes), every control character
    (C0, DEL, C1: NUL, tab, newline, carriage return, U+0085 ...) and U+2028/U+2029, the
    line breaks `str.splitlines()` knows besides the control characters. Between words,
    spaces, tabs and newlines only separate (the tokenizer has dropped them already).
    """
    for word in words:
        problem = value_problem(word)
        if problem is not None:
            raise CommandError(f"the word {_shown(word)} {problem} (quote a value on one line)")


def _shown(word: str) -> str:
    """A word as the error message shows it: escaped (no raw control character) and cut short."""
    return repr(word if len(word) <= 60 else word[:57] + "...")
