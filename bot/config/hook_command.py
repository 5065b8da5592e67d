"""A drain hook's command line as flagbot accepts it, for the config and for the node command table.

One rule in one place, like `unit_names`: a hook command is written by whoever writes the config
(never by chat input), but it still reaches a remote shell, so the config refuses at load what the
command table (`bot.target.params`) would refuse at run time. The program is named by absolute
path (the login's PATH on a node is not the config author's), every word is one argv element,
quoted on its own, and no word holds a control character or a line break (nothing that could end
a line in the shell or in the audit log).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

MAX_HOOK_WORDS: Final = 64
MAX_HOOK_WORD: Final = 1024
PROGRAM_PATH: Final = re.compile(r"^/(?:[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*/)*[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*$")
"""An absolute path of plain names (none starting with a dot, so no `..`), no spaces, no shell
metacharacters."""


def breaks_a_line(word: str) -> bool:
    """Whether `word` holds a control character or a line break (C0, DEL, C1, U+2028/9): nothing a
    remote shell or an audit log line should receive inside one argv word."""
    return any(ord(ch) < 32 or 127 <= ord(ch) <= 159 or ch in "\u2028\u2029" for ch in word)


class HookCommandError(ValueError):
    """A hook command flagbot refuses; the message says which rule."""


def check_hook_command(value: object) -> list[str]:
    """`value` as a list of argv words when it is a command flagbot may run as a hook, else
    `HookCommandError`."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
        raise HookCommandError(
            'a hook command is a non-empty list of words, the program first: ["/usr/local/bin/lb", "drain"]'
        )
    if len(value) > MAX_HOOK_WORDS:
        raise HookCommandError(f"a hook command has at most {MAX_HOOK_WORDS} words, not {len(value)}")
    words: list[str] = []
    for word in value:
        if not isinstance(word, str) or len(word) > MAX_HOOK_WORD:
            raise HookCommandError(f"{word!r} is not a word of at most {MAX_HOOK_WORD} characters")
        if breaks_a_line(word):
            raise HookCommandError(f"{word!r} holds a control character or a line break")
        words.append(word)
    program = words[0]
    if not PROGRAM_PATH.match(program):
        raise HookCommandError(f"{program!r} is not a program's absolute path (e.g. /usr/local/bin/lb-drain)")
    return words
