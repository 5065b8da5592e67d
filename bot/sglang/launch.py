"""Find the SGLang launch line in a systemd unit, a shell script, a pasted command or a
`docker run` wrapper, and split it into entrypoint, environment and an ordered FlagSet.

This is the read half of flag editing: the target-control layer rewrites `flags` and puts the
line back, so the parser refuses (LaunchParseError) rather than guesses whenever the launch line
is not where flagbot could write it back: a unit whose ExecStart= runs a script, several SGLang
commands in one script, a docker option it does not know. The rules are in docs/parsers/launch.md.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.sglang.flagset import FlagItem, FlagSet
from bot.sglang.launch_docker import find_docker_run, parse_docker_run
from bot.sglang.launch_shell import (
    LaunchInScriptError,
    LaunchParseError,
    ShellEnv,
    basename,
    drop_passthrough,
    is_assignment,
    split_commands,
    strip_reserved,
)
from bot.sglang.launch_unit import parse_unit

__all__ = [
    "LaunchInScriptError",
    "LaunchKind",
    "LaunchLine",
    "LaunchParseError",
    "parse_flags",
    "parse_launch_text",
]

LaunchKind = Literal["unit", "script", "docker", "command"]

_MODULE = re.compile(r"sglang(?:\.\w+)*\.(?:launch_server|server)")
_PYTHON = re.compile(r"python[\d.]*")
_PYTHON_OPTION = re.compile(r"-[bBdEiIOqsSuv]+")
_NEGATIVE = re.compile(r"-\.?\d")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh"})
_UNIT_FIRST_LINE = re.compile(r"\[[^\[\]\n]+\]\s*$|[A-Z][a-z]+[A-Za-z]*\s*=")

_SCRIPT_ADVICE = (
    "the launch line is in a script the unit calls; flags can only be edited when ExecStart runs "
    "sglang directly (python -m sglang.launch_server or sglang serve)"
)


@dataclass
class LaunchLine:
    """An SGLang launch line: what runs it, with which environment, and its flags in order."""

    entrypoint: str
    env: dict[str, str]
    flags: FlagSet
    kind: LaunchKind
    wrapper: list[str] = field(default_factory=list)
    """Tokens before the interpreter (a wrapper script, `nohup`, the `docker run ... image` part)."""
    line: int = 0
    """1-based line of the text where the launch command starts."""

    def to_json(self) -> dict[str, Any]:
        return {
            "entrypoint": self.entrypoint,
            "env": dict(self.env),
            "flags": self.flags.to_json(),
            "kind": self.kind,
        }

    def summary(self) -> str:
        shown = ", ".join(" ".join(item.argv()) for item in self.flags.items[:4])
        more = len(self.flags.items) - 4
        tail = f" (+{more} more)" if more > 0 else ""
        return (
            f"{self.kind} launch line: {self.entrypoint}; {len(self.flags.items)} flags, "
            f"{len(self.env)} env vars" + (f"; {shown}{tail}" if shown else "")
        )


def _is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and _NEGATIVE.match(token) is None


def parse_flags(argv: Sequence[str], *, line: int = 0) -> FlagSet:
    """Group an SGLang argv into flags: boolean, one value, or several values; order kept.

    No flag catalog is used, so a flag's arity comes from the words after it. `-1` and `-0.5`
    are values (argparse reads them the same way); a value that starts with `-` otherwise cannot
    be told from a flag.
    """
    items: list[FlagItem] = []
    index = 0
    where = f"line {line}: " if line else ""
    while index < len(argv):
        word = argv[index]
        if word == "--" or not _is_flag(word):
            raise LaunchParseError(f"{where}argument {word!r} is not a flag and follows no flag")
        index += 1
        values: list[str] = []
        while index < len(argv) and not _is_flag(argv[index]):
            values.append(argv[index])
            index += 1
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if eq and values:
            raise LaunchParseError(f"{where}{values[0]!r} follows {word}, which already has its value")
        if eq:
            items.append(FlagItem(name, inline))
        elif not values:
            items.append(FlagItem(word, None))
        else:
            items.append(FlagItem(word, values[0] if len(values) == 1 else tuple(values)))
    return FlagSet(tuple(items))


@dataclass
class _Invocation:
    env: dict[str, str]
    wrapper: list[str]
    entry: list[str]
    argv: list[str]
    docker: bool = False


def _entry_span(words: list[str]) -> tuple[int, int, list[str]] | None:
    """(start, end, entry words) of `python -m sglang.launch_server` or `sglang serve`."""
    for index, word in enumerate(words):
        if word == "-m" and index + 1 < len(words) and _MODULE.fullmatch(words[index + 1]):
            end, module = index + 2, ["-m", words[index + 1]]
        elif word.startswith("-m") and _MODULE.fullmatch(word[2:]):
            end, module = index + 1, [word]
        elif basename(word) == "sglang" and words[index + 1 : index + 2] == ["serve"]:
            return index, index + 2, [word, "serve"]
        else:
            continue
        start = index
        while start > 0 and _PYTHON_OPTION.fullmatch(words[start - 1]):
            start -= 1
        options = words[start:index]
        if start > 0 and not words[start - 1].startswith("-"):
            interpreter = words[start - 1]
            _, eq, value = interpreter.partition("=")
            if eq and is_assignment(interpreter) and _PYTHON.fullmatch(basename(value)):
                interpreter = value  # a harness echo such as `command=python3 -m ...`
            return start - 1, end, [interpreter, *options, *module]
        return start, end, [*options, *module]
    return None


def _split_prefix(prefix: list[str], *, inline_env: bool) -> tuple[dict[str, str], list[str]]:
    """Peel `exec`, inline `VAR=value` and `env VAR=value` off the words before the interpreter."""
    env: dict[str, str] = {}
    index = 0
    while index < len(prefix):
        word = prefix[index]
        if inline_env and word == "exec":
            index += 1
            while index < len(prefix) and prefix[index] in ("-c", "-l", "-a"):
                index += 2 if prefix[index] == "-a" else 1
        elif inline_env and is_assignment(word):
            name, _, value = word.partition("=")
            env[name] = value
            index += 1
        elif basename(word) == "env" and index + 1 < len(prefix) and is_assignment(prefix[index + 1]):
            index += 1
            while index < len(prefix) and is_assignment(prefix[index]):
                name, _, value = prefix[index].partition("=")
                env[name] = value
                index += 1
        else:
            break
    return env, prefix[index:]


def _invocation(words: list[str], *, inline_env: bool, line: int) -> _Invocation | None:
    """The SGLang invocation inside one command, or None when the command does not run SGLang."""
    words = strip_reserved(words)
    span = _entry_span(words)
    run_index = find_docker_run(words)
    if run_index is not None and (span is None or run_index < span[0]):
        return _docker_invocation(words, run_index, line)
    if span is None:
        return None
    start, end, entry = span
    env, wrapper = _split_prefix(words[:start], inline_env=inline_env)
    return _Invocation(env=env, wrapper=wrapper, entry=entry, argv=words[end:])


def _docker_invocation(words: list[str], run_index: int, line: int) -> _Invocation:
    """Only what follows the image is SGLang's; the env is the container's (`-e`), not docker's."""
    run = parse_docker_run(words, run_index, line)
    image = words[run.image_index]
    wrapper = words[: run.image_index + 1]
    args = words[run.image_index + 1 :]
    span = _entry_span(args)
    inside = span is not None and span[0] == 0  # `python3 -m ...`, `sglang serve`, or `-m ...`
    if not inside and (not args or _is_flag(args[0])):
        return _Invocation(
            run.env, wrapper, [f"{run.program} run ... {image} (image entrypoint)"], args, True
        )
    if span is None or not inside:
        raise LaunchInScriptError(
            f"line {line}: the container runs {args[0]!r}, not SGLang; flagbot can only edit flags "
            "when the image entrypoint or the container command is sglang itself"
        )
    entry = [f"{run.program} run ... {image}", *span[2]]
    return _Invocation(run.env, wrapper, entry, args[span[1] :], True)


def _display(words: Sequence[str]) -> str:
    return " ".join(
        shlex.quote(word) if not word or any(c.isspace() for c in word) else word for word in words
    )


def _line_from(found: _Invocation, kind: LaunchKind, base_env: dict[str, str], line: int) -> LaunchLine:
    env = dict(found.env) if found.docker else {**base_env, **found.env}
    if found.docker:  # entry[0] is the already formatted `docker run ... <image>` part
        entrypoint = " ".join([found.entry[0], _display(found.entry[1:])]).rstrip()
    else:
        entrypoint = _display([*found.wrapper, *found.entry])
    flags = parse_flags(found.argv, line=line)
    return LaunchLine(
        entrypoint=entrypoint, env=env, flags=flags, kind=kind, wrapper=list(found.wrapper), line=line
    )


def _parse_unit(text: str) -> LaunchLine:
    service = parse_unit(text)
    if not service.commands:
        raise LaunchParseError("the unit has no ExecStart= in [Service] (or it was reset and not set again)")
    for command in reversed(service.commands):
        found = _invocation(command.argv, inline_env=False, line=command.line)
        if found is not None:
            return _line_from(found, "unit", service.env, command.line)
    last = service.commands[-1]
    program = basename(last.argv[0])
    runs = f"a shell command ({program} -c ...)" if program in _SHELLS and "-c" in last.argv else last.argv[0]
    raise LaunchInScriptError(f"line {last.line}: ExecStart= runs {runs}, not SGLang: {_SCRIPT_ADVICE}")


def _parse_shell(text: str, kind: LaunchKind | None) -> LaunchLine:
    env = ShellEnv()
    found: list[tuple[_Invocation, dict[str, str], int]] = []
    commands = [(command.line, strip_reserved(drop_passthrough(command))) for command in split_commands(text)]
    commands = [(line, words) for line, words in commands if words]
    for line, words in commands:
        if env.apply(words):
            continue
        invocation = _invocation(words, inline_env=True, line=line)
        if invocation is not None:
            found.append((invocation, dict(env.exported), line))
    if not found:
        raise LaunchParseError(
            "no SGLang launch command found (looked for `python -m sglang.launch_server`, "
            "`sglang serve` and `docker run <image> ...`)"
        )
    if len(found) > 1:
        lines = ", ".join(str(line) for _, _, line in found)
        raise LaunchParseError(f"several SGLang launch commands (lines {lines}); give flagbot just one")
    invocation, exported, line = found[0]
    if kind is None:
        if invocation.docker:
            kind = "docker"
        elif text.lstrip().startswith("#!") or len(commands) > 1:
            kind = "script"
        else:
            kind = "command"
    elif kind == "docker" and not invocation.docker:
        raise LaunchParseError(f"line {line}: kind='docker' but the command does not run docker")
    return _line_from(invocation, kind, exported, line)


def _looks_like_unit(text: str) -> bool:
    for raw in text.split("\n"):
        line = raw.strip()
        if line and not line.startswith(("#", ";")):
            return _UNIT_FIRST_LINE.match(line) is not None
    return False


def parse_launch_text(text: str, *, kind: LaunchKind | Literal["auto"] = "auto") -> LaunchLine:
    """Parse a unit, script, pasted command or docker wrapper; `auto` tells them apart.

    A unit is recognised by its first meaningful line (`[Section]` or a `Key=` setting); anything
    else is read as shell. Raises LaunchParseError (LaunchInScriptError for a unit that runs a
    script) with the line number when the text cannot be read.
    """
    if kind == "unit" or (kind == "auto" and _looks_like_unit(text)):
        return _parse_unit(text)
    return _parse_shell(text, None if kind == "auto" else kind)
