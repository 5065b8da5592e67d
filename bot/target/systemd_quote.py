"""systemd's quoting, for writing `ExecStart=` and `Environment=` lines (systemd.syntax(7)).

Why not `shlex.quote`: the layer that parses a drop-in is systemd, not a shell. systemd expands
`%` specifiers in both settings (so a literal `%` is `%%`), substitutes `$VAR`/`${VAR}` in
`ExecStart=` words at exec time (so a literal `$` is `$$` there, but *not* in `Environment=`,
whose values are taken as written; a word that is exactly `${NAME}` or `--flag=${NAME}` is a
reference and written as it is, see `is_reference_word`), and reads C-style escapes inside double quotes. A newline
or another control character cannot be written safely (a newline would end the setting and
start a new one: an injection), so it is refused with the offending value named.

The read side is the foundation's `bot.sglang.launch_unit` (quotes, escapes, `%%`) plus
`unescape_exec_word` for the `$$` that systemd, not the unit parser, resolves at exec time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from bot.sglang.launch_unit import parse_unit

_SAFE_WORD = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXEC_PREFIX = "-@:+!|"
_REFERENCE_WORD = re.compile(r"(?:--[A-Za-z0-9][A-Za-z0-9_.-]*=)?\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_ENV_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


class SystemdQuoteError(ValueError):
    """A value that cannot be written into a unit file safely; the message names it."""


_UNICODE_BREAKS = {
    "\x85": "a next-line character (U+0085)",
    "\u2028": "a line separator (U+2028)",
    "\u2029": "a paragraph separator (U+2029)",
}
"""Line breaks beyond the C0 controls: `str.splitlines()` (and so any reader of a unit or of
`systemctl show` that splits lines the Python way) ends a line at each."""


def _refuse_control(value: str, what: str) -> None:
    for char in value:
        if char in _UNICODE_BREAKS:
            raise SystemdQuoteError(
                f"{what} {value!r} contains {_UNICODE_BREAKS[char]}, a line break; flagbot refuses "
                "to write it into a unit file (a reader would see the end of the setting)"
            )
        if ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F:
            name = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab"}.get(
                char, f"control character U+{ord(char):04X}"
            )
            raise SystemdQuoteError(
                f"{what} {value!r} contains {name}; flagbot refuses to write it into a unit file "
                "(systemd would read it as the end of the setting)"
            )
        if 0xD800 <= ord(char) <= 0xDFFF:
            raise SystemdQuoteError(f"{what} {value!r} is not valid text (a lone surrogate)")


def _escape(value: str, *, dollar: bool) -> str:
    text = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return text.replace("$", "$$") if dollar else text


def is_reference_word(word: str) -> bool:
    """A word flagbot keeps as a reference: exactly `${NAME}`, or `--flag=${NAME}`.

    systemd replaces `${NAME}` at start with the variable's value as one word (from `Environment=`
    or an `EnvironmentFile=`, whose value flagbot never writes), so a secret such as an API key can stay in a
    root-only file on the node. Every other `$` is a literal and is written as `$$`.
    """
    return _REFERENCE_WORD.fullmatch(word) is not None


def quote_exec_word(word: str, *, what: str = "argument") -> str:
    """One `ExecStart=` word: the process will receive exactly `word` as one argument, or, for a
    reference word (`is_reference_word`), the referenced variable's value as one argument."""
    _refuse_control(word, what)
    if _SAFE_WORD.fullmatch(word) or is_reference_word(word):
        return word
    return f'"{_escape(word, dollar=True)}"'


def render_exec(argv: Sequence[str]) -> str:
    """The value of an `ExecStart=` line that runs exactly `argv` (no prefix, no `;`)."""
    if not argv:
        raise SystemdQuoteError("ExecStart needs at least the program")
    program = argv[0]
    if not program or program[0] in _EXEC_PREFIX:
        raise SystemdQuoteError(
            f"program {program!r}: systemd would read a leading {program[:1]!r} as an ExecStart prefix"
        )
    return " ".join(quote_exec_word(word, what=f"argument {index}") for index, word in enumerate(argv))


def render_environment(env: Mapping[str, str]) -> list[str]:
    """`Environment=` values, one assignment per line (one line per variable reads best in a diff)."""
    lines = []
    for name, value in env.items():
        if not _ENV_NAME.fullmatch(name):
            raise SystemdQuoteError(f"environment variable name {name!r} is not a valid name")
        _refuse_control(value, f"environment value of {name}")
        lines.append(f'"{name}={_escape(value, dollar=False)}"')
    return lines


def unescape_exec_word(word: str) -> str:
    """`$$` -> `$`: what systemd's exec-time substitution does to a word without references."""
    return word.replace("$$", "$")


def env_references(word: str) -> list[str]:
    """Names of `$VAR`/`${VAR}` references in an `ExecStart=` word (after unquoting; `$$` is no reference)."""
    names: list[str] = []
    for part in word.split("$$"):
        names.extend(match[1] or match[2] for match in _ENV_REFERENCE.finditer(part))
    return names


def stored_exec_word(word: str) -> str:
    """A word as systemd stores it after loading `quote_exec_word(word)`: `$` is `$$`, except in a reference word."""
    return word if is_reference_word(word) else word.replace("$", "$$")


def substitute_env(word: str, env: Mapping[str, str]) -> str:
    """A word as the process receives it: references replaced from `env`, `$$` -> `$`.

    Raises `KeyError` naming a variable `env` does not hold (e.g. one an `EnvironmentFile=` sets
    when `env` is only the unit's `Environment=`).
    """
    parts = []
    for part in word.split("$$"):

        def value(match: re.Match[str]) -> str:
            return env[match[1] or match[2]]

        parts.append(_ENV_REFERENCE.sub(value, part))
    return "$".join(parts)


def parse_exec(value: str) -> list[list[str]]:
    """An `ExecStart=` value back to the argv each command receives (the foundation's unquoting,
    then `$$` -> `$`); the inverse of `render_exec` for values without references."""
    service = parse_unit(f"[Service]\nExecStart={value}\n")
    return [[unescape_exec_word(word) for word in command.argv] for command in service.commands]


def parse_environment(lines: Sequence[str]) -> dict[str, str]:
    """`Environment=` values back to a mapping (the inverse of `render_environment`)."""
    text = "".join(f"Environment={line}\n" for line in lines)
    return parse_unit(f"[Service]\n{text}").env
