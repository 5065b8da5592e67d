"""Playbook parameters: `key=value` words from `flagbot run` (or YAML defaults) to their JSON form.

The JSON form is what the experiment row stores and what actions receive, so a resumed or
re-read run sees exactly what the first one saw: changes are `Change.to_json()` dicts,
expectations their canonical text (`str(Expectation)`), ids and ints are numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from bot.commands.grammar import parse_command
from bot.commands.tokens import CommandError, tokenize
from bot.commands.values import MAX_ID
from bot.sglang.change import Change
from bot.sglang.expectation import ExpectationError, parse_expectation
from bot.sglang.metrics import unknown_metric_message

if TYPE_CHECKING:
    from bot.sglang.catalog import FlagCatalog

TRUE = frozenset({"true", "yes", "on", "1"})
FALSE = frozenset({"false", "no", "off", "0"})
MAX_INT64 = 2**63 - 1
"""An `int` parameter fits a signed 64-bit column."""
_ONE_EXPECTATION = re.compile(
    r"\s*(?P<text>[A-Za-z_][A-Za-z0-9_.]*\s*(?:>=|<=|==|!=|=>|=<|>|<|=)\s*[^\s,]+)\s*(?:,|(?=\s)|$)"
)


ParamValue = bool | int | str | list[str] | list[dict[str, Any]]
"""A parameter in its JSON form: a switch, a number or id, text, expectations (their canonical
texts) or changes (`Change.to_json()` dicts)."""


ParamKind = Literal["changes", "expectations", "text", "int", "id", "choice", "bool"]


@dataclass(frozen=True)
class ParamSpec:
    name: str
    kind: ParamKind
    required: bool = False
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] = ()


class WithParams(Protocol):
    """What parameter parsing needs of a playbook: its name and its parameters (`bot.loop.playbook`
    defines the playbook, which imports this module to check its defaults)."""

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> tuple[ParamSpec, ...]: ...


class ParamError(ValueError):
    """A parameter value that does not fit its playbook; the message names the playbook and key.
    `flag_list`: refused by the flag list it was read with (another SGLang version's may take it)."""

    def __init__(self, message: str, *, flag_list: bool = False) -> None:
        super().__init__(message)
        self.flag_list = flag_list


class _FlagListValueError(ValueError):
    """A `changes` value the flag list refused (a flag it lacks, a value it refuses)."""


def convert(spec: ParamSpec, value: object, *, catalog: FlagCatalog | None) -> ParamValue:
    """One value (text from the command line, or a YAML value) in the parameter's JSON form."""
    kind = spec.kind
    if kind == "changes":
        return _changes(value, catalog)
    if kind == "expectations":
        return _expectations(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in TRUE | FALSE:
            return text in TRUE
        raise ValueError(f"{value!r} is not true or false")
    if kind in ("int", "id"):
        return _integer(value, positive=kind == "id")
    text = str(value)
    if kind == "choice" and text not in spec.choices:
        raise ValueError(f"{text!r} is not one of {', '.join(spec.choices)}")
    return text


def _integer(value: object, *, positive: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{value!r} is not a whole number")
    text = str(value).strip()
    if positive:
        text = text.removeprefix("#")
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"{value!r} is not a whole number") from None
    if positive and not 1 <= number <= MAX_ID:
        raise ValueError(f"{value!r} is not an id (a number from 1 to {MAX_ID})")
    if not -MAX_INT64 <= number <= MAX_INT64:
        raise ValueError(f"{value!r} is too large (a whole number of at most 64 bits)")
    return number


def _changes(value: object, catalog: FlagCatalog | None) -> list[dict[str, Any]]:
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return [Change.from_json(item).to_json() for item in value]
    text = " ".join(str(item) for item in value) if isinstance(value, list) else str(value)
    try:
        invocation = parse_command(["try", *tokenize(text)], catalog=catalog)
    except CommandError as exc:
        raise (_FlagListValueError if exc.flag_list else ValueError)(exc.message) from None
    if invocation.expectations or invocation.options:
        raise ValueError(f"{text!r}: only flag changes here (add, set, remove, env)")
    return [change.to_json() for change in invocation.changes]


def _expectations(value: object) -> list[str]:
    texts = [str(item) for item in value] if isinstance(value, list) else _split_expectations(str(value))
    if not texts:
        raise ValueError("no expectation given, e.g. max_running_requests>=48")
    result = []
    for text in texts:
        try:
            expectation = parse_expectation(text)
        except ExpectationError as exc:
            raise ValueError(str(exc)) from None
        problem = unknown_metric_message(expectation.metric)
        if problem:
            raise ValueError(f"expectation {text!r}: {problem}")
        result.append(str(expectation))
    return result


def _split_expectations(text: str) -> list[str]:
    """`a>=1, b<2` or `a>=1 b<2` into its expectations; text that is none of them is an error."""
    found: list[str] = []
    pos = 0
    while pos < len(text.rstrip()):
        match = _ONE_EXPECTATION.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"cannot read expectation {text[pos:].strip()!r}: write metric OP value")
        found.append(match["text"])
        pos = match.end()
    return found


def parse_params(
    playbook: WithParams, raw: Mapping[str, str], *, catalog: FlagCatalog | None
) -> dict[str, Any]:
    """`key=value` words of `flagbot run` to the playbook's parameters in JSON form, defaults filled."""
    unknown = sorted(set(raw) - {spec.name for spec in playbook.params})
    if unknown:
        raise ParamError(f"playbook {playbook.name}: unknown parameter {unknown[0]!r}; {_listing(playbook)}")
    values: dict[str, Any] = {}
    for spec in playbook.params:
        if spec.name in raw:
            values[spec.name] = _converted(playbook, spec, raw[spec.name], catalog)
    return complete_params(playbook, values, catalog=catalog)


def complete_params(
    playbook: WithParams, params: Mapping[str, Any], *, catalog: FlagCatalog | None = None
) -> dict[str, Any]:
    """Parameters already in JSON form (from a service call or a stored experiment), checked and
    completed: unknown keys refused, required ones demanded, defaults filled in."""
    unknown = sorted(set(params) - {spec.name for spec in playbook.params})
    if unknown:
        raise ParamError(f"playbook {playbook.name}: unknown parameter {unknown[0]!r}; {_listing(playbook)}")
    values = dict(params)
    for spec in playbook.params:
        if values.get(spec.name) is not None:
            continue
        if spec.required:
            hint = f" ({spec.help})" if spec.help else ""
            raise ParamError(f"playbook {playbook.name}: missing required parameter {spec.name!r}{hint}")
        default = spec.default
        values[spec.name] = None if default is None else _converted(playbook, spec, default, catalog)
    return values


def _converted(
    playbook: WithParams, spec: ParamSpec, value: object, catalog: FlagCatalog | None
) -> ParamValue:
    try:
        return convert(spec, value, catalog=catalog)
    except ValueError as exc:
        raise ParamError(
            f"playbook {playbook.name}: {spec.name}={value!r}: {exc}",
            flag_list=isinstance(exc, _FlagListValueError),
        ) from None


def _listing(playbook: WithParams) -> str:
    names = [spec.name for spec in playbook.params]
    return f"parameters: {', '.join(names)}" if names else "it takes no parameters"
