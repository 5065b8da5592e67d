"""The one command grammar for the CLI and Slack (documented in docs/commands.md).

    COMMAND [SUB] [POSITIONAL ...] [CHANGE ...] [EXPECTATION ...] [name=value ...]

- CHANGE (only in commands that change flags): `add --x [V ...]`, `set --x=V` / `set --x V`,
  `remove --x`, `env set NAME=V`, `env unset NAME`; a bare `--x [V]` means `add`.
  Flag names are resolved against the target's own SGLang flag list (aliases and unambiguous
  prefixes become canonical names, as SGLang's argparse would take them) and values are
  checked the way argparse checks them. `remove --x` of a well-formed name the list does not
  have is taken as written, with a note (`Invocation.notes`): a unit may carry a flag its
  SGLang dropped, and it must stay removable; whether the unit has it is checked where the
  unit is read (preflight: "not in the current flags").
- EXPECTATION: `metric OP value`, e.g. `max_running_requests>=48`.
- Options: `name=value`; in commands without flag changes also `--name value`, because there a
  `--` word cannot be an SGLang flag.

The CLI hands its raw words here, so `--enable-x` is never mistaken for a flagbot option.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bot.commands.registry import COMMANDS, CommandSpec, Option, Positional, Tier, get_command
from bot.commands.tokens import CommandError, check_words, tokenize
from bot.commands.values import check_option, check_positional
from bot.redaction import REFERENCE, redactor
from bot.sglang.catalog import (
    AmbiguousFlagError,
    FlagCatalog,
    FlagSpec,
    FlagValueError,
    UnknownFlagError,
    typographic_dash_hint,
)
from bot.sglang.change import ENV_NAME, Change
from bot.sglang.expectation import LOOKS_LIKE_EXPECTATION, Expectation, ExpectationError, parse_expectation
from bot.sglang.flagset import FlagValue
from bot.sglang.metrics import unknown_metric_message

CHANGE_VERBS = frozenset({"add", "set", "remove", "env"})
_NEGATIVE_NUMBER = re.compile(r"^-(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_OPTION_WORD = re.compile(r"^(?P<key>[a-z][a-z0-9_-]*)=(?P<value>.*)$", re.DOTALL)
FLAG_NAME = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
"""What an SGLang flag name can look like; a word of another shape is refused whatever the list."""


@dataclass(frozen=True)
class Invocation:
    """A parsed command, ready for RBAC (via `tier`) and for the service that runs it."""

    spec: CommandSpec
    sub: str | None = None
    positionals: dict[str, str | tuple[str, ...]] = field(default_factory=dict)
    options: dict[str, str] = field(default_factory=dict)
    changes: tuple[Change, ...] = ()
    expectations: tuple[Expectation, ...] = ()
    notes: tuple[str, ...] = ()
    """What the user should know of how the words were read (a removed flag the list lacks)."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def tier(self) -> Tier:
        return self.spec.tier_for(self.sub)


def parse_command(words: str | Sequence[str], *, catalog: FlagCatalog | None = None) -> Invocation:
    """Parse a command text (Slack) or word list (CLI); raise CommandError naming the exact problem."""
    # every word, and so every value in it, is one line of text: `tokenize` checks a command text
    # (Slack), `check_words` the CLI's words (a surrogate-escaped byte, a newline in a quoted argument)
    tokens = command_words(words) if isinstance(words, str) else list(words)
    if not isinstance(words, str):
        check_words(tokens)
    if tokens and tokens[0] in ("/flagbot", "flagbot"):
        tokens = tokens[1:]
    tokens = normalize_words(tokens)
    if not tokens:
        raise CommandError("no command given", usage="COMMAND [ARGS]; try `help`", example="status")
    spec = get_command(tokens[0])
    if spec is None:
        _unknown_command(tokens[0])
    assert spec is not None
    return _Parser(spec, tokens[1:], catalog).parse()


_OPERATORS = (">=", "<=", "==", "!=", ">", "<")
_METRIC = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_METRIC_THEN_OPERATOR = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(>=|<=|==|!=|>|<)$")
_OPERATOR_THEN_VALUE = re.compile(r"^(>=|<=|==|!=|>|<)[^=<>]")
_BARE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
"""A word that could be a flag's name written without its dashes (`enable-metrics`)."""


def command_words(text: str) -> list[str]:
    """A command text's words as the grammar reads them: `tokenize`, then `normalize_words`.
    A text wrapped in one pair of backticks (`` `try add --x` ``, as chat code formatting
    pastes it) is read without them."""
    stripped = text.strip()
    if len(stripped) > 1 and stripped[0] == stripped[-1] == "`" and stripped.count("`") == 2:
        text = stripped[1:-1]
    return normalize_words(tokenize(text))


def normalize_words(words: Sequence[str]) -> list[str]:
    """The words (command name first) with what chat and habit add taken out, the same for every
    front end; applying it twice changes nothing more:

    - one pair of backticks around a word (`` `--enable-metrics` ``) or around a few words
      (`` `max_running_requests >= 48` ``) is dropped; a backtick inside a word, or one more
      than the pair, is kept as written;
    - an expectation written with spaces around its operator (`max_running_requests >= 48`,
      `max_running_requests>= 48`, `max_running_requests >=48`) is joined into one word, in a
      command that takes expectations;
    - a yes/no option written as a switch (`--dry-run`, `--force`, `--markdown`: the CLI's
      spelling) is `NAME=yes` in a command that has that option, unless a change verb asks for a
      flag right before it or its value follows (`--force yes`).
    """
    out = _unbackticked(list(words))
    spec = get_command(out[0]) if out else None
    if spec is None:
        return out
    if spec.expectations or any(sub.expectations for sub in spec.subs):
        out = [out[0], *_joined_expectations(out[1:])]
    switched: list[str] = [out[0]]
    for index, word in enumerate(out[1:], start=1):
        option = spec.option(word[2:]) if word.startswith("--") else None
        following = out[index + 1] if index + 1 < len(out) else None
        if (
            option is not None
            and option.kind == "choice"
            and option.choices == ("yes", "no")
            and switched[-1] not in CHANGE_VERBS
            and following not in ("yes", "no")  # `--force yes`: the option with its value
        ):
            word = f"{option.name}=yes"
        switched.append(word)
    return switched


def _unbackticked(words: list[str]) -> list[str]:
    out = list(words)
    index = 0
    while index < len(out):
        word = out[index]
        if len(word) > 1 and word.startswith("`") and word.count("`") == 1:
            end = next((j for j in range(index + 1, len(out)) if "`" in out[j]), None)
            if end is not None and len(out[end]) > 1 and out[end].endswith("`") and out[end].count("`") == 1:
                out[index] = word[1:]
                out[end] = out[end][:-1]
                index = end
        elif len(word) > 2 and word[0] == word[-1] == "`" and "`" not in word[1:-1]:
            out[index] = word[1:-1]
        index += 1
    return out


def _joined_expectations(words: list[str]) -> list[str]:
    out: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        following = words[index + 1] if index + 1 < len(words) else None
        previous = out[-1] if out else None
        if word in _OPERATORS and previous is not None and _METRIC.match(previous) and following is not None:
            out[-1] = previous + word + following  # `metric >= 48`
            index += 2
            continue
        if (
            _METRIC_THEN_OPERATOR.match(word)
            and following is not None
            and not following.startswith(_OPERATORS)
        ):
            out.append(word + following)  # `metric>= 48`
            index += 2
            continue
        if _OPERATOR_THEN_VALUE.match(word) and previous is not None and _METRIC.match(previous):
            out[-1] = previous + word  # `metric >=48`
            index += 1
            continue
        out.append(word)
        index += 1
    return out


def _unknown_command(word: str) -> None:
    hint = typographic_dash_hint(word)
    if hint:
        raise CommandError(hint)
    names = [spec.name for spec in COMMANDS]
    close = difflib.get_close_matches(word.lower(), names, n=1)
    suggestion = f"; did you mean `{close[0]}`?" if close else ""
    raise CommandError(
        f"unknown command {word!r}{suggestion}", usage="COMMAND [ARGS]; commands: " + ", ".join(names)
    )


class _Parser:
    """One pass over the words; state is local to one command."""

    def __init__(self, spec: CommandSpec, tokens: list[str], catalog: FlagCatalog | None) -> None:
        self.spec = spec
        self.tokens = tokens
        self.pos = 0
        self._catalog = catalog
        self.sub: str | None = None
        self.options: dict[str, str] = {}
        self.changes: list[Change] = []
        self.expectations: list[Expectation] = []
        self.notes: list[str] = []
        self.verb = "add"
        """The change verb a bare `--x` continues: `set --a 1 --b 2` sets both."""
        self.words: list[str] = []
        self.slots: tuple[Positional, ...] = ()

    # -- helpers -----------------------------------------------------------------------------

    def fail(self, message: str, *, flag_list: bool = False) -> CommandError:
        return CommandError(
            message, usage=self.spec.usage, example=self.spec.examples[0], flag_list=flag_list
        )

    @property
    def catalog(self) -> FlagCatalog:
        if self._catalog is None:  # no target, so no version: the documented default list
            self._catalog, _ = FlagCatalog.nearest(None)
        return self._catalog

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def is_option_word(self, token: str) -> bool:
        match = _OPTION_WORD.match(token)
        if match is None:
            return False
        return self.spec.free_options or self.spec.option(match["key"]) is not None

    def is_value(self, token: str | None) -> bool:
        """Whether a word can be a flag's value: argparse's rule, plus our own keywords."""
        if token is None:
            return False
        if token.startswith("-") and not _NEGATIVE_NUMBER.match(token):
            return False
        if token in CHANGE_VERBS or self.is_option_word(token):
            return False
        return not (self.spec.expectations and LOOKS_LIKE_EXPECTATION.match(token))

    # -- the pass ----------------------------------------------------------------------------

    def parse(self) -> Invocation:
        self.slots = positionals = self._sub_and_positionals()
        while (token := self.peek()) is not None:
            hint = typographic_dash_hint(token)
            if hint:
                raise self.fail(hint)
            if self.spec.changes and (token in CHANGE_VERBS or token.startswith("-")):
                self._change()
            elif token.startswith("--"):
                self._dashed_option()
            elif (match := _OPTION_WORD.match(token)) and not match["value"].startswith(("=", ">", "<")):
                if self.is_option_word(token):
                    self._option(match["key"], match["value"])
                    self.pos += 1
                elif any(slot.raw for slot in self.slots):
                    self.words.append(self.take())  # `grep max_running_requests=`: a pattern, not an option
                else:
                    self._unknown_option(token)
            elif self.spec.expectations and LOOKS_LIKE_EXPECTATION.match(token):
                self.expectations.append(self._expectation(self.take()))
            else:
                self.words.append(self.take())
        return self._finish(positionals)

    def _sub_and_positionals(self) -> tuple[Positional, ...]:
        if not self.spec.subs:
            return self.spec.positionals
        first = self.peek()
        sub = self.spec.sub(first.lower()) if first else None
        if sub is not None:
            self.pos += 1
        elif self.spec.default_sub and (first is None or "=" in first or first.startswith("--")):
            sub = self.spec.sub(self.spec.default_sub)
        if sub is None:
            names = "|".join(s.name for s in self.spec.subs)
            raise self.fail(f"{self.spec.name} needs one of {names}, got {first!r}")
        self.sub = sub.name
        if sub.expectations and not self.spec.expectations:
            self.spec = _with_expectations(self.spec)
        return sub.positionals

    def _expectation(self, token: str) -> Expectation:
        try:
            expectation = parse_expectation(token)
        except ExpectationError as exc:
            raise self.fail(str(exc)) from None
        problem = unknown_metric_message(expectation.metric)
        if problem:
            raise self.fail(f"expectation {token!r}: {problem}")
        return expectation

    def _unknown_option(self, token: str) -> None:
        key = token.split("=", 1)[0]
        known = ", ".join(opt.name for opt in self.spec.options) or "none"
        numeric = re.fullmatch(r"[+-]?[\d.]+%?", token.split("=", 1)[1])
        extra = " (an expectation compares with ==)" if self.spec.expectations and numeric else ""
        raise self.fail(f"unknown option {key!r} for {self.spec.name}{extra}; options: {known}")

    def _dashed_option(self) -> None:
        token = self.take()
        name, has_value, value = token[2:].partition("=")
        option = self.spec.option(name)
        if option is None and any(slot.raw for slot in self.slots):
            self.words.append(token)  # `grep --enable-x`: a pattern may look like a flag
            return
        if option is None:
            known = ", ".join(f"--{opt.name}" for opt in self.spec.options) or "none"
            raise self.fail(f"unknown option {token.split('=')[0]!r} for {self.spec.name}; options: {known}")
        if not has_value:
            if self.peek() is None:
                raise self.fail(f"--{name} needs a value")
            value = self.take()
        self._option(name, value)

    def _option(self, key: str, value: str) -> None:
        if key in self.options:
            raise self.fail(f"option {key!r} is given twice")
        option = self.spec.option(key)
        if option is not None:
            value = self._checked(option, value)
        self.options[key] = value

    def _checked(self, option: Option, value: str) -> str:
        if option.kind == "flags":  # SGLang flag names, as the target's flag list spells them
            names = [name for name in value.replace(",", " ").split() if name]
            for name in names:
                dashless = None if name.startswith("-") else self._dashless(name, f"{option.name}={name}")
                if dashless:
                    raise self.fail(dashless)
            if not names or not all(name.startswith("--") for name in names):
                raise self.fail(
                    f"{option.name}={value!r}: expected comma-separated flags such as --enable-x,--tp"
                )
            return ",".join(dict.fromkeys(self._taken_out(option.name, name) for name in names))
        try:
            return check_option(option, value)
        except ValueError as exc:
            raise self.fail(f"{option.name}={value!r}: {exc}") from None

    # -- changes -----------------------------------------------------------------------------

    def _change(self) -> None:
        token = self.peek()
        assert token is not None
        if token == "env":  # noqa: S105 (a keyword, not a password)
            self.pos += 1
            self.verb = "add"
            self.changes.append(self._env_change())
        elif token in ("add", "set", "remove"):
            self.pos += 1
            self.verb = token
            self.changes.append(self._flag_change(token))
        else:
            self.changes.append(self._flag_change(self.verb))
        self._no_repeats()

    def _env_change(self) -> Change:
        verb = self.take() if self.peek() in ("set", "unset") else None
        if verb is None:
            raise self.fail("env needs `set NAME=VALUE` or `unset NAME`")
        word = self.take() if self.peek() is not None else ""
        name, equals, value = word.partition("=")
        if not ENV_NAME.match(name):
            raise self.fail(
                f"env {verb}: {name!r} is not a variable name (letters, digits, _; not first a digit)"
            )
        if verb == "set":
            if not equals:
                raise self.fail(f"env set {name}: write NAME=VALUE, e.g. env set {name}=1")
            if redactor().is_secret_name(name):
                raise self.fail(
                    f"env set {name}: {name} is a secret name ([redaction] secret_names): flagbot does not "
                    "take secret values in a command (they would be posted and stored); keep it in the "
                    "unit's EnvironmentFile= on the node"
                )
            return Change("env-set", env_name=name, env_value=value)
        if equals:
            raise self.fail(f"env unset {name}: takes a name only, not a value")
        return Change("env-unset", env_name=name)

    def _flag_change(self, verb: str) -> Change:
        word = self.take() if self.peek() is not None else ""
        if not word.startswith("--"):
            hint = typographic_dash_hint(word) or self._dashless(word, f"{verb} {word}")
            raise self.fail(hint or f"{verb} expects an SGLang flag such as --enable-metrics, got {word!r}")
        written, has_inline, inline = word.partition("=")
        if verb == "remove":
            if has_inline or self.is_value(self.peek()):
                raise self.fail(f"remove {written}: takes no value")
            return self._removal(written)
        spec = self._resolve(written)
        value = self._values(spec, inline if has_inline else None)
        if verb == "set" and not spec.takes_value:
            raise self.fail(
                f"set {written}: {spec.name} is a switch; use `add {spec.name}` or `remove {spec.name}`"
            )
        self._no_literal_secret(spec.name, value)
        try:
            self.catalog.check_value(spec, value)
        except FlagValueError as exc:
            raise self.fail(str(exc), flag_list=True) from None
        return Change("add" if verb == "add" else "set", spec.name, value, written=written)

    def _no_literal_secret(self, flag: str, value: FlagValue) -> None:
        """A secret flag's value only as a `${NAME}` reference (kept as written in the drop-in;
        systemd expands it from the unit's `EnvironmentFile=` at start)."""
        if not redactor().is_secret_flag(flag) or value is None:
            return
        values = value if isinstance(value, tuple) else (value,)
        if all(REFERENCE.fullmatch(item) for item in values):
            return
        raise self.fail(
            f"`{flag}` is a secret flag ([redaction] secret_flags): flagbot does not take its value in a "
            "command (it would be posted and stored); put the value in the unit's EnvironmentFile= on "
            f"the node and write a reference, e.g. `{flag}=${{SGLANG_API_KEY}}`"
        )

    def _removal(self, written: str) -> Change:
        """`remove --x`: the list's canonical name; a well-formed name the list lacks as written
        (a flag already in the unit can always be removed, even one this SGLang dropped)."""
        name = self._known_or_as_written(
            written,
            f"remove {written}",
            "removed as written if the unit carries it (a unit that does not is refused when the unit is read)",
        )
        return Change("remove", name, written=written)

    def _taken_out(self, option: str, written: str) -> str:
        """A flag name of a `flags=` option (flags a revert takes out of the unit): canonical, or a
        well-formed name the list lacks as written, with a note (the unit may carry a flag its
        SGLang dropped; the step that reads the unit refuses a name it does not carry)."""
        return self._known_or_as_written(written, f"{option}={written}", "taken as written")

    def _known_or_as_written(self, written: str, what: str, outcome: str) -> str:
        """A flag name to take out of a unit: canonical when the list knows it, else as written
        when it is well formed, with a note saying so (`what`: the words, `outcome`: what is done)."""
        try:
            return self.catalog.resolve(written).name
        except UnknownFlagError as exc:
            if not FLAG_NAME.match(written):
                raise self.fail(str(exc)) from None
            close = f" (did you mean {' or '.join(exc.suggestions)}?)" if exc.suggestions else ""
        except AmbiguousFlagError as exc:
            raise self.fail(str(exc), flag_list=True) from None
        self.notes.append(f"{what}: not a flag of SGLang {self.catalog.version}'s list{close}; {outcome}")
        return written

    def _dashless(self, word: str, where: str, *, only_known: bool = False) -> str | None:
        """The refusal of a flag name written without its dashes where a flag is meant, naming the
        dashed name when this SGLang's list knows it (None: the word cannot be a flag name, or,
        with `only_known`, the list does not know it with dashes either)."""
        if not _BARE_NAME.match(word) or word in CHANGE_VERBS:
            return None
        try:
            known: str | None = self.catalog.resolve(f"--{word}").name
        except (UnknownFlagError, AmbiguousFlagError):
            known = None
        if known is None and only_known:
            return None
        if known is not None:
            return f"{where}: an SGLang flag is written with its dashes; did you mean `{known}`?"
        return (
            f"{where}: an SGLang flag is written with its dashes, and SGLang {self.catalog.version}'s "
            f"list has no --{word} either"
        )

    def _resolve(self, written: str) -> FlagSpec:
        try:
            return self.catalog.resolve(written)
        except UnknownFlagError as exc:  # another version's list may have it, unless no list can
            raise self.fail(str(exc), flag_list=bool(FLAG_NAME.match(written))) from None
        except AmbiguousFlagError as exc:
            raise self.fail(str(exc), flag_list=True) from None

    def _values(self, spec: FlagSpec, inline: str | None) -> FlagValue:
        """Collect values the way argparse would for this flag's nargs (see module doc)."""
        values: list[str] = [] if inline is None else [inline]
        if not spec.takes_value:
            return inline
        many = spec.nargs in ("+", "*") or (isinstance(spec.nargs, int) and spec.nargs > 1)
        limit = spec.nargs if isinstance(spec.nargs, int) else (None if many else 1)
        while (limit is None or len(values) < limit) and self.is_value(self.peek()):
            values.append(self.take())
        if many:
            return tuple(values)
        return values[0] if values else None

    def _no_repeats(self) -> None:
        last = self.changes[-1]
        key = last.flag or last.env_name
        if sum(1 for change in self.changes if (change.flag or change.env_name) == key) > 1:
            raise self.fail(f"{key} appears twice in this command; give each flag one change")

    def _positional(self, slot: Positional, word: str) -> str:
        try:
            return check_positional(slot, word)
        except ValueError as exc:
            raise self.fail(f"{slot.name.upper()} {word!r}: {exc}") from None

    # -- finish ------------------------------------------------------------------------------

    def _finish(self, slots: tuple[Positional, ...]) -> Invocation:
        values: dict[str, str | tuple[str, ...]] = {}
        words = list(self.words)
        for slot in slots:
            if slot.repeat:
                values[slot.name] = tuple(words)
                words = []
            elif words:
                values[slot.name] = self._positional(slot, words.pop(0))
            elif slot.required:
                raise self.fail(
                    f"{self.spec.name}{' ' + self.sub if self.sub else ''} needs {slot.name.upper()}"
                    f" ({slot.help})"
                )
        if words:
            dashless = self._dashless(words[0], words[0], only_known=True) if self.spec.changes else None
            if dashless:
                raise self.fail(dashless)
            raise self.fail(
                f"unexpected {words[0]!r}"
                + ("; flag changes start with add, set, remove or env" if self.spec.changes else "")
            )
        if self.spec.changes and not self.changes:
            raise self.fail(f"{self.spec.name} needs at least one change, e.g. add --enable-metrics")
        if self.spec.needs_expectation and not self.expectations:
            raise self.fail(f"{self.spec.name} needs an expectation, e.g. max_running_requests>=48")
        return Invocation(
            self.spec,
            self.sub,
            values,
            dict(self.options),
            tuple(self.changes),
            tuple(self.expectations),
            tuple(self.notes),
        )


def _with_expectations(spec: CommandSpec) -> CommandSpec:
    return replace(spec, expectations=True)
