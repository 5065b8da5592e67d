"""Tell which table entry an argv is, if any: the check that flagbot runs nothing else.

Why: `NodeSession.run` only takes table names, but a test should not have to trust that. A
fake node (unit tests) or an audit log (integration tests) records the exact command texts
that reached a host; `identify` finds the entry and parameters that render to exactly that
argv (re-rendering to compare, so a value the validators refuse never matches).
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from string import Formatter

from bot.target.privileged import (
    COMMANDS,
    DERIVED,
    LIST_PARAMS,
    PARAMS,
    PROGRAMS,
    NodeCommand,
    Opt,
    ParamError,
    Rest,
    render_params,
)


def _coerce(name: str, text: str) -> object | None:
    """A parameter value whose validated rendering is exactly `text`, or None."""
    candidates: list[object] = [text, text.split(",")]
    for convert in (int, float):
        with contextlib.suppress(ValueError):
            candidates.append(convert(text))
    for value in candidates:
        try:
            if PARAMS[name](value) == text:
                return value
        except ParamError:
            continue
    return None


def _literal(token: str, word: str, params: dict[str, object], unit: str) -> dict[str, object] | None:
    """Match one literal token (with `{fields}`) against one word; the params it fixes."""
    pattern, fields = "", []
    for literal, field, _, _ in Formatter().parse(token):
        pattern += re.escape(literal)
        if field:
            if field in DERIVED:
                pattern += re.escape(DERIVED[field](unit))
            elif field in fields:
                pattern += f"(?P={field})"
            else:
                fields.append(field)
                pattern += f"(?P<{field}>.*)"
    match = re.fullmatch(pattern, word, re.DOTALL)
    if match is None:
        return None
    found = dict(params)
    for field in fields:
        value = _coerce(field, match[field])
        if value is None or (field in found and found[field] != value):
            return None
        found[field] = value
    return found


def _match(
    tokens: Sequence[str | Opt | Rest], words: Sequence[str], params: dict[str, object], unit: str
) -> Iterator[dict[str, object]]:
    if not tokens:
        if not words:
            yield params
        return
    token, rest = tokens[0], tokens[1:]
    if isinstance(token, Rest):  # always last: it takes every remaining word
        with contextlib.suppress(ParamError):
            yield {**params, token.param: LIST_PARAMS[token.param](list(words))}
        return
    if isinstance(token, Opt):
        yield from _match(rest, words, params, unit)  # absent
        if words and words[0] == token.flag:
            if _bool_switch(token.param) and token.param not in params:
                yield from _match(rest, words[1:], {**params, token.param: True}, unit)
            elif len(words) > 1:
                value = _coerce(token.param, words[1])
                if value is not None:
                    yield from _match(rest, words[2:], {**params, token.param: value}, unit)
        return
    if words:
        found = _literal(token, words[0], params, unit)
        if found is not None:
            yield from _match(rest, words[1:], found, unit)


def _bool_switch(name: str) -> bool:
    try:
        return PARAMS[name](True) == ""
    except ParamError:
        return False


def identify(
    argv: Sequence[str] | str, *, unit: str, programs: Mapping[str, str] = PROGRAMS
) -> tuple[str, dict[str, object]] | None:
    """(entry name, parameters) of the table entry that renders exactly to `argv`, or None.

    `argv` may be the shell text a host received (split with shlex). `unit` is the target's
    unit, which fixes the derived paths (drop-in, bus path).
    """
    words = shlex.split(argv) if isinstance(argv, str) else list(argv)
    sudo = words[:2] == ["sudo", "-n"]
    body = words[2:] if sudo else words
    for command in COMMANDS.values():
        if not body or body[0] != _program(command, programs, sudo):
            continue
        start: dict[str, object] = {"unit": unit} if "unit" in command.required else {}
        for params in _match(command.args, body[1:], start, unit):
            try:
                rendered = render_params(command.name, params, sudo=sudo, programs=programs)
            except ParamError:
                continue
            if rendered.argv == words:
                return command.name, params
    return None


def _program(command: NodeCommand, programs: Mapping[str, str], sudo: bool) -> str:
    if command.privileged:
        return programs[command.program]
    return "" if sudo else command.program
