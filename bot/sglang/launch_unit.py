"""systemd side of the launch-line parser: read a unit's `[Service]` `ExecStart=` and
`Environment=` the way systemd itself does (systemd.syntax(7), systemd.service(5)).

shlex is not used on purpose: systemd differs from the shell. Backslash escapes are C-style and
work inside single quotes too, `$VAR` is not a shell expansion, `%` starts a specifier, comment
lines inside a backslash continuation are skipped, and an empty `ExecStart=` resets the list.

Deliberate limits, documented in docs/parsers/launch.md: specifiers other than `%%` (`%i`, `%h`,
...) and `$VAR`/`${VAR}`/`$$` are kept as written, because flagbot neither knows their values nor
may change them when it writes the line back. `EnvironmentFile=` is read by the target layer
(the files are on the node); `parse_environment_file` reads one file's text as systemd does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.sglang.launch_shell import LaunchParseError

_WHITESPACE = " \t\n\r"
_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}
_NUMERIC_ESCAPES = {"x": (16, 2), "u": (16, 4), "U": (16, 8)}
_HEX = re.compile(r"[0-9a-fA-F]+")
_OCTAL = re.compile(r"[0-7]{3}")
_EXEC_PREFIX = "-@:+!"
_SECTION = re.compile(r"\[([^\[\]]+)\]")


def _escape(value: str, pos: int) -> tuple[str, int]:
    """Decode the escape whose backslash is at `pos`; returns (text, next position).

    An escape systemd does not know is kept as written (backslash included): systemd warns and
    keeps it too ("Ignoring unknown escape sequences").
    """
    following = value[pos + 1 : pos + 2]
    if not following:
        return "\\", pos + 1
    if following in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[following], pos + 2
    digits = ""
    if following in _NUMERIC_ESCAPES:
        base, width = _NUMERIC_ESCAPES[following]
        digits = value[pos + 2 : pos + 2 + width]
        valid = len(digits) == width and _HEX.fullmatch(digits) is not None
        end = pos + 2 + width
    else:
        base, digits = 8, value[pos + 1 : pos + 4]
        valid = _OCTAL.fullmatch(digits) is not None
        end = pos + 4
    if valid:
        code = int(digits, base)
        if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF:
            return chr(code), end
    return "\\" + following, pos + 2


def systemd_split(value: str, *, line: int, setting: str) -> list[str]:
    """Split a setting's value into words with systemd's quoting rules.

    A quote may open anywhere in a word and the quoted part joins the word (`--x="a b"` is the one
    word `--x=a b`), as systemd's extract_first_word does; escapes apply inside both kinds of quotes.
    """
    return [word for word, _ in _split_raw(value, line=line, setting=setting)]


def _split_raw(value: str, *, line: int, setting: str) -> list[tuple[str, str]]:
    """(decoded word, word as written) pairs; ExecStart= needs the raw form to find a bare `;`."""
    words: list[tuple[str, str]] = []
    pos, end = 0, len(value)
    while True:
        while pos < end and value[pos] in _WHITESPACE:
            pos += 1
        if pos >= end:
            return words
        start = pos
        word: list[str] = []
        quote = ""
        while pos < end:
            char = value[pos]
            if not quote and char in _WHITESPACE:
                break
            if char == "\\":
                text, pos = _escape(value, pos)
                word.append(text)
                continue
            if not quote and char in "\"'":
                quote = char
            elif quote and char == quote:
                quote = ""
            else:
                word.append(char)
            pos += 1
        if quote:
            kind = "double" if quote == '"' else "single"
            raise LaunchParseError(f"line {line}: unterminated {kind} quote in {setting}=")
        words.append(("".join(word), value[start:pos]))


def expand_specifiers(value: str) -> str:
    """`%%` -> `%`; every other specifier is kept as written (see the module docstring)."""
    return value.replace("%%", "%")


@dataclass
class ExecCommand:
    argv: list[str]
    line: int


@dataclass
class UnitService:
    """The parts of a unit the launch parser needs, after drop-in style resets were applied."""

    commands: list[ExecCommand] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash continuations (the backslash becomes a space), skipping comment lines.

    A line continues only when it ends in an odd number of backslashes, so `\\\\` at the end is
    an escaped backslash, as in systemd's config parser.
    """
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        stripped = line.lstrip(_WHITESPACE)
        if not pending:
            start = number
        if stripped[:1] in ("#", ";") and stripped:
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1] + " ")
            continue
        pending.append(line)
        out.append((start, "".join(pending)))
        pending = []
    if pending:
        out.append((start, "".join(pending)))
    return out


def _exec_commands(value: str, line: int) -> list[ExecCommand]:
    """One `ExecStart=` value: specifiers, unquoting, `;` separators, then the `-@:+!` prefixes."""
    groups: list[list[str]] = [[]]
    for word, raw in _split_raw(expand_specifiers(value), line=line, setting="ExecStart"):
        if raw == ";":  # only an unquoted `;` separates commands; `\;` and `";"` are arguments
            groups.append([])
        else:
            groups[-1].append(";" if raw == "\\;" else word)
    commands: list[ExecCommand] = []
    for group in groups:
        if not group:
            continue
        first = group[0]
        prefix = first[: len(first) - len(first.lstrip(_EXEC_PREFIX))]
        path = first[len(prefix) :]
        if not path:
            raise LaunchParseError(f"line {line}: ExecStart= has no executable after the prefix {prefix!r}")
        rest = group[1:]
        if "@" in prefix and rest:
            rest = rest[1:]  # with `@` the second word is argv[0], not an argument
        commands.append(ExecCommand([path, *rest], line))
    return commands


def _environment(value: str, line: int, env: dict[str, str]) -> None:
    for word in systemd_split(expand_specifiers(value), line=line, setting="Environment"):
        name, eq, rest = word.partition("=")
        if eq and name:  # systemd ignores (with a warning) items that are not NAME=VALUE
            env[name] = rest


def parse_unit(text: str) -> UnitService:
    """Collect `[Service]` ExecStart= commands and Environment= of a unit (or a drop-in stack).

    Keys outside `[Service]` are ignored; a text with no section header at all (a pasted
    `ExecStart=` line) is read as if it were all `[Service]`.
    """
    service = UnitService()
    lines = _logical_lines(text)
    has_sections = any(_SECTION.fullmatch(body.strip()) for _, body in lines)
    section = None if has_sections else "Service"
    for line, body in lines:
        stripped = body.strip(_WHITESPACE)
        if not stripped:
            continue
        header = _SECTION.fullmatch(stripped)
        if header:
            section = header[1]
            continue
        key, eq, value = stripped.partition("=")
        if not eq or section != "Service":
            continue
        key, value = key.strip(_WHITESPACE), value.strip(_WHITESPACE)
        if key == "ExecStart":
            if value:
                service.commands.extend(_exec_commands(value, line))
            else:
                service.commands = []
        elif key == "Environment":
            if value:
                _environment(value, line, service.env)
            else:
                service.env = {}
    return service


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_file_value(raw: str) -> str:
    """One value of an environment file: quotes removed (a quoted part may span spaces), in
    double quotes `\\`, `\"`, `\\$` and `` \\` `` unescaped, outside quotes a backslash keeps the
    next character; trailing blanks of an unquoted value are dropped (systemd's env-file rules)."""
    out: list[str] = []
    pos, quote = 0, ""
    raw = raw.strip(_WHITESPACE)
    while pos < len(raw):
        char = raw[pos]
        if quote == "'":
            if char == "'":
                quote = ""
            else:
                out.append(char)
        elif quote == '"':
            if char == '"':
                quote = ""
            elif char == "\\" and raw[pos + 1 : pos + 2] in ('"', "\\", "`", "$"):
                pos += 1
                out.append(raw[pos])
            else:
                out.append(char)
        elif char in "'\"":
            quote = char
        elif char == "\\" and pos + 1 < len(raw):
            pos += 1
            out.append(raw[pos])
        else:
            out.append(char)
        pos += 1
    return "".join(out)


def parse_environment_file(text: str) -> dict[str, str]:
    """`NAME=VALUE` lines of an `EnvironmentFile=` (systemd.exec(5)): `#` and `;` lines are
    comments, a trailing backslash continues a line, a line without `=` or with a bad name is
    skipped (systemd warns and skips it too); a later line wins."""
    env: dict[str, str] = {}
    for _, body in _logical_lines(text):
        line = body.strip(_WHITESPACE)
        if not line:
            continue
        name, eq, value = line.partition("=")
        name = name.strip(_WHITESPACE)
        if eq and _ENV_NAME.fullmatch(name):
            env[name] = _env_file_value(value)
    return env
