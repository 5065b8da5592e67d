"""SGLang's flag list as a typed catalog: resolve what a human typed, check values like argparse.

Why: a flag change must be refused in chat, with a useful message, before a server is
restarted with it. SGLang's own parser would exit with code 2 only after the restart, and the
bot cannot import SGLang (it needs torch). So the flag list is shipped as data
(`data/sglang-<version>-flags.json`, made by `tools/gen_flag_catalog.py`) and the two checks
SGLang's argparse would make are repeated here *with argparse itself*:

- name matching (`resolve`): exact option strings, then argparse's unambiguous-prefix rule
  (`allow_abbrev` is on in SGLang, so `--tp 8` means `--tp-size 8`). Rather than re-implement
  that rule, the catalog builds an `ArgumentParser` whose options are the flags and asks it;
  so the answer is whatever this Python's argparse does.
- value checking (`check_value`): a one-flag `ArgumentParser` with the flag's nargs, type and
  choices parses `[flag, *values]`, so counts, `-1` versus `-x`, and messages are argparse's.

Canonical names: each flag is shown by the option string that spells the `ServerArgs` field it
sets (`--tp-size` for `--tensor-parallel-size`/`--tp-size`, field `tp_size`), because that is
what the server's `server_args=ServerArgs(...)` startup line shows and what the bot diffs;
when no option string spells the field, SGLang's first one (the one `--help` lists first).

Lists are packaged for SGLang 0.5.9, 0.5.10 and 0.5.23 (`packaged_versions`); any other
version is judged by the nearest of them in version order (`FlagCatalog.nearest`,
`nearest_packaged`), and the caller names that list in its reply.

`--no-X` of an `argparse.BooleanOptionalAction` flag is a spec of its own (`negates="--X"`),
so canonicalising it can never silently turn "off" into "on".
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, NoReturn

from bot.sglang.json_value import JsonValue

from . import data as _data
from .flag_types import CONVERTERS as _CONVERTERS
from .flag_types import Converter
from .flagset import FlagValue

DEFAULT_VERSION = "0.5.10"

_TYPOGRAPHIC_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
"""Hyphen, non-breaking hyphen, figure dash, en dash, em dash, horizontal bar, minus sign and
their small/full-width forms: what autocorrect and Slack put where a `-` was typed."""
_TO_HYPHEN = str.maketrans(dict.fromkeys(_TYPOGRAPHIC_DASHES, "-"))
_AMBIGUOUS = re.compile(r"ambiguous option: (?P<option>.*) could match (?P<matches>.*)", re.DOTALL)


@dataclass(frozen=True)
class FlagSpec:
    """One SGLang flag as argparse declares it.

    `takes_value` is False for switches (store_true, DeprecatedAction, `--no-X`, ...), whose
    `nargs` is 0. Otherwise `nargs` is argparse's: None for exactly one value, an int, or
    `"?"`, `"*"`, `"+"` (so `"?"`/`"*"` flags take a value but may also stand alone).
    `type_name` names the converter SGLang gives argparse (`int`, `float`, `json.loads`, ...);
    `choices` are shown as strings and compared after conversion, as argparse does.
    `field` is the `ServerArgs` field the flag sets (None when it sets none, e.g. deprecated
    no-ops); `negates` is set on the generated `--no-X` spec of a BooleanOptionalAction.
    """

    name: str
    aliases: tuple[str, ...] = ()
    takes_value: bool = True
    nargs: str | int | None = None
    type_name: str | None = None
    choices: tuple[str, ...] | None = None
    default: Any = None
    help: str = ""
    deprecated: bool = False
    action: str = "store"
    field: str | None = None
    negates: str | None = None

    def __post_init__(self) -> None:
        for option in (self.name, *self.aliases):
            if len(option) < 2 or not option.startswith("-"):
                raise ValueError(f"flag option {option!r} must start with '-' and have a name")
        if not self.takes_value:
            if self.nargs not in (None, 0):
                raise ValueError(
                    f"{self.name}: a switch (takes_value=False) cannot have nargs={self.nargs!r}"
                )
            object.__setattr__(self, "nargs", 0)
        elif self.nargs == 0:
            raise ValueError(f"{self.name}: nargs=0 means takes_value=False")

    @property
    def option_strings(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


class UnknownFlagError(ValueError):
    """No flag of this SGLang version is, or uniquely starts with, what was typed."""

    def __init__(self, flag: str, suggestions: Sequence[str] = (), version: str | None = None) -> None:
        self.flag = flag
        self.suggestions = tuple(suggestions)
        self.version = version
        self.hint = typographic_dash_hint(flag)
        where = f" for SGLang {version}" if version else ""
        message = f"unknown flag {flag}{where}"
        if self.hint:
            message += f": {self.hint}"
            if self.suggestions:
                message += f" (that is {self.suggestions[0]})"
        elif self.suggestions:
            message += f"; did you mean {_or_list(self.suggestions)}?"
        super().__init__(message)


class AmbiguousFlagError(ValueError):
    """What was typed is a prefix of several flags; argparse refuses it, and so do we."""

    def __init__(self, flag: str, candidates: Sequence[str], version: str | None = None) -> None:
        self.flag = flag
        self.candidates = tuple(candidates)
        self.version = version
        where = f" for SGLang {version}" if version else ""
        super().__init__(f"ambiguous flag {flag}{where}: could match {', '.join(self.candidates)}")


class FlagValueError(ValueError):
    """A value argparse would refuse; the message reads like argparse's (`argument --x: ...`)."""

    def __init__(self, flag: str, message: str) -> None:
        self.flag = flag
        super().__init__(message)


def typographic_dash_hint(token: str) -> str | None:
    """A hint when `token` starts with a typographic dash, e.g. Slack's `—` for a typed `--`.

    Returns None for ordinary words and flags, and for a lone dash (no name after it).
    """
    name = token.lstrip("-" + _TYPOGRAPHIC_DASHES)
    lead = token[: len(token) - len(name)]
    if not any(ch in _TYPOGRAPHIC_DASHES for ch in lead) or not name[:1].isalnum():
        return None
    fixed = "--" + name.translate(_TO_HYPHEN)
    return f"`{token}` starts with a typographic dash (Slack turns `--` into `—`); did you mean `{fixed}`?"


class FlagCatalog:
    """The flags of one SGLang version: name resolution and value checks, as argparse does them.

    Immutable after construction; the two argparse parsers are built lazily and cached.
    """

    def __init__(self, version: str, specs: Iterable[FlagSpec]) -> None:
        self.version = version
        self._specs = tuple(specs)
        self._by_option: dict[str, FlagSpec] = {}
        for spec in self._specs:
            for option in spec.option_strings:
                other = self._by_option.setdefault(option, spec)
                if other is not spec:
                    raise ValueError(f"{option} is declared by both {other.name} and {spec.name}")
        self._matcher: _Parser | None = None
        self._value_parsers: dict[str, _Parser] = {}

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def load(cls, version: str = DEFAULT_VERSION) -> FlagCatalog:
        """The catalog packaged for `version` (cached; raises LookupError if none is shipped)."""
        return _load_packaged(version)

    @classmethod
    def nearest(cls, version: str | None) -> tuple[FlagCatalog, str | None]:
        """The packaged list for `version`, else the nearest one, with a note naming it.

        (catalog, None) when `version` has its own packaged list, or is None (no version
        known: the default `DEFAULT_VERSION` list, as documented for an unset
        `sglang_version`). Otherwise the nearest packaged release by version order (see
        `nearest_packaged`) and a note that says which list stands in and why.
        """
        if version is None:
            return _load_packaged(DEFAULT_VERSION), None
        if version in packaged_versions():
            return _load_packaged(version), None
        try:
            chosen, tied = nearest_packaged(version)
        except ValueError:
            return _load_packaged(DEFAULT_VERSION), (
                f"SGLang version {version!r} is not a release number (like {DEFAULT_VERSION}); "
                f"checking against the packaged SGLang {DEFAULT_VERSION} list"
            )
        note = (
            f"no flag list for SGLang {version} is packaged; "
            f"checking against the nearest packaged list, SGLang {chosen}"
        )
        if tied is not None:
            note += (
                f" ({chosen} and {tied} are equally near; the older is used, "
                "as releases add flags more often than they drop them)"
            )
        return _load_packaged(chosen), note

    @classmethod
    def from_specs(cls, version: str, specs: Iterable[FlagSpec]) -> FlagCatalog:
        """A catalog from explicit specs: for tests, and for hosts that report their own flags."""
        return cls(version, specs)

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> FlagCatalog:
        """A catalog from the generator's JSON document (see `tools/gen_flag_catalog.py`)."""
        specs: list[FlagSpec] = []
        for flag in document["flags"]:
            nargs = flag["nargs"]
            choices = flag["choices"]
            specs.append(
                FlagSpec(
                    name=flag["name"],
                    aliases=tuple(flag["aliases"]),
                    takes_value=nargs != 0,
                    nargs=nargs,
                    type_name=flag["type"],
                    choices=None if choices is None else tuple(str(c) for c in choices),
                    default=flag["default"],
                    help=flag["help"],
                    deprecated=flag["deprecated"],
                    action=flag["action"],
                    field=flag["field"],
                )
            )
            for negative in flag.get("negative_option_strings", ()):
                specs.append(
                    FlagSpec(
                        name=negative,
                        takes_value=False,
                        help=f"Turns {flag['name']} off (argparse BooleanOptionalAction negation).",
                        deprecated=flag["deprecated"],
                        action=flag["action"],
                        field=flag["field"],
                        negates=flag["name"],
                    )
                )
        return cls(str(document["sglang_version"]), specs)

    # -- container protocol ---------------------------------------------------------------------

    def __contains__(self, name: object) -> bool:
        """True when SGLang's argparse would accept `name` as a flag (prefixes included)."""
        if not isinstance(name, str):
            return False
        try:
            self.resolve(name)
        except (UnknownFlagError, AmbiguousFlagError):
            return False
        return True

    def __iter__(self) -> Iterator[FlagSpec]:
        """Specs in SGLang's source order (each `--no-X` right after its `--X`)."""
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"FlagCatalog(version={self.version!r}, flags={len(self._specs)})"

    # -- names ----------------------------------------------------------------------------------

    def get(self, option: str) -> FlagSpec | None:
        """Exact lookup of a name or alias; no prefix matching."""
        return self._by_option.get(option)

    def resolve(self, name: str) -> FlagSpec:
        """The spec `name` means to SGLang: exact option string, else a unique argparse prefix.

        `name` is a flag name only; split `--x=value` first (`--tp=8` is refused here with
        `--tp-size` as the suggestion). Raises UnknownFlagError or AmbiguousFlagError.
        """
        exact = self._by_option.get(name)
        if exact is not None:
            return exact
        if "=" not in name:
            found = self._match(name)
            if found is not None:
                return found
        raise UnknownFlagError(name, self._suggestions(name), self.version)

    def canonical(self, name: str) -> str:
        """The name flagbot shows for `name` (see the module docstring for the rule)."""
        return self.resolve(name).name

    def _match(self, token: str) -> FlagSpec | None:
        """Ask argparse which flag `token` selects; None when it selects none."""
        namespace = argparse.Namespace()
        try:
            self._matching_parser().parse_known_args([token], namespace)
        except _ParserError as complaint:
            candidates = self._ambiguity(token, complaint.message)
            if candidates:
                raise AmbiguousFlagError(token, candidates, self.version) from None
            return None
        index: int | None = getattr(namespace, _HIT, None)
        return None if index is None else self._specs[index]

    def _ambiguity(self, token: str, message: str) -> tuple[str, ...]:
        """The option strings argparse listed as matches; () when the complaint is another one."""
        match = _AMBIGUOUS.fullmatch(message)
        if match is None:
            return ()
        listed = tuple(option for option in match["matches"].split(", ") if option in self._by_option)
        if listed:
            return listed
        return tuple(option for option in self._by_option if option.startswith(token))

    def _suggestions(self, name: str) -> tuple[str, ...]:
        """Canonical names worth offering: a repaired spelling first, then close matches."""
        found: list[str] = []
        head = name.partition("=")[0]
        stripped = head.lstrip("-" + _TYPOGRAPHIC_DASHES).translate(_TO_HYPHEN)
        if not any(ch.isalnum() for ch in stripped):
            return ()
        repairs = [head, "--" + stripped, "--" + stripped.replace("_", "-").lower()]
        for repair in dict.fromkeys(r for r in repairs if r not in ("", "--")):
            spec = self._by_option.get(repair)
            if spec is None and repair != name and "=" not in repair:
                try:
                    spec = self._match(repair)
                except AmbiguousFlagError:
                    spec = None
            if spec is not None:
                found.append(spec.name)
                break
        for close in difflib.get_close_matches("--" + stripped, list(self._by_option), n=6, cutoff=0.6):
            found.append(self._by_option[close].name)
        return tuple(dict.fromkeys(found))[:3]

    def _matching_parser(self) -> _Parser:
        if self._matcher is None:
            parser = _Parser(prog="sglang serve", add_help=False, allow_abbrev=True)
            for index, spec in enumerate(self._specs):
                parser.add_argument(
                    *spec.option_strings,
                    action=_Hit,
                    nargs=0,
                    dest=_HIT,
                    const=index,
                    default=argparse.SUPPRESS,
                )
            self._matcher = parser
        return self._matcher

    # -- values ---------------------------------------------------------------------------------

    def check_value(self, spec: FlagSpec, value: FlagValue) -> None:
        """Raise FlagValueError unless SGLang's argparse would take `spec.name` with `value`.

        `value` is None for no value, a string for one, a tuple for several (an empty tuple
        for a `*` flag given none).
        """
        values: tuple[str, ...] = () if value is None else (value,) if isinstance(value, str) else value
        if not spec.takes_value:
            if values:
                shown = " ".join(repr(v) for v in values)
                raise FlagValueError(
                    spec.name, f"argument {spec.name}: takes no value (it is a switch), got {shown}"
                )
            return
        try:
            _, extras = self._value_parser(spec).parse_known_args([spec.name, *values])
        except _ParserError as complaint:
            message = complaint.message
            if message.startswith(f"argument {spec.name}: expected") and any(
                v.startswith("-") for v in values
            ):
                message += _DASH_NOTE
            raise FlagValueError(spec.name, message) from None
        if extras:
            dashed = [extra for extra in extras if extra.startswith("-")]
            if dashed:
                message = (
                    f"argument {spec.name}: {dashed[0]!r} would be read as a flag, not a value{_DASH_NOTE}"
                )
            else:
                message = f"argument {spec.name}: {_expects(spec.nargs)}, got {len(values)}"
            raise FlagValueError(spec.name, message)

    def _value_parser(self, spec: FlagSpec) -> _Parser:
        parser = self._value_parsers.get(spec.name)
        if parser is None:
            parser = _Parser(prog="sglang serve", add_help=False, allow_abbrev=False)
            converter = _CONVERTERS.get(spec.type_name or "str", str)
            kwargs: dict[str, Any] = {"dest": "value", "type": converter}
            if spec.nargs is not None:
                kwargs["nargs"] = spec.nargs
            if spec.choices is not None:
                kwargs["choices"] = [_as_choice(converter, choice) for choice in spec.choices]
            parser.add_argument(spec.name, **kwargs)
            self._value_parsers[spec.name] = parser
        return parser


# -- argparse plumbing ----------------------------------------------------------------------------

_HIT = "flagbot_matched_spec"
_DASH_NOTE = " (argparse reads a word starting with '-' as a flag unless it is a negative number)"


class _ParserError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of printing usage and exiting the bot."""

    def error(self, message: str) -> NoReturn:
        raise _ParserError(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _ParserError(message or f"exit {status}")


class _Hit(argparse.Action):
    """Records which spec argparse selected (its index is the action's `const`)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, self.const)


def _expects(nargs: str | int | None) -> str:
    if nargs is None or nargs == 1:
        return "expected one argument"
    if nargs == "?":
        return "expected at most one argument"
    return f"expected {nargs} arguments"


def _or_list(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _as_choice(converter: Converter, choice: str) -> JsonValue:
    """Choices are compared after conversion (`--max-lora-chunk-size` has int choices)."""
    try:
        return converter(choice)
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return choice


# -- versions -------------------------------------------------------------------------------------

_RELEASE = re.compile(
    r"v?(?P<release>[0-9]+(?:\.[0-9]+)*)"
    r"(?:[-_.]?(?P<pre>a|alpha|b|beta|c|rc|pre|preview)[-_.]?(?P<pre_n>[0-9]*))?"
    r"(?:[-_.]?(?P<post>post|rev|r)[-_.]?(?P<post_n>[0-9]*))?"
    r"(?:[-_.]?(?P<dev>dev)[-_.]?(?P<dev_n>[0-9]*))?"
    r"(?:\+[0-9a-z.]+)?",
    re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}

VersionKey = tuple[tuple[int, ...], tuple[int, int], int, tuple[int, int]]


def version_key(version: str) -> VersionKey:
    """A sort key that orders SGLang versions as PEP 440 does: `0.5.9 < 0.5.10 < 0.5.23`,
    `0.5.10.dev1 < 0.5.10rc1 < 0.5.10 < 0.5.10.post1`; a local part (`+cu128`) is ignored.

    Raises ValueError for text that is not a release number.
    """
    match = _RELEASE.fullmatch(version.strip())
    if match is None:
        raise ValueError(f"{version!r} is not a release number like 0.5.10, 0.5.10rc1 or 0.5.10.post1")
    release = tuple(int(part) for part in match["release"].split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    if match["pre"]:
        pre = (_PRE_RANK[match["pre"].lower()], int(match["pre_n"] or 0))
    elif match["dev"] and not match["post"]:
        pre = (-1, 0)  # 0.5.10.dev1 comes before 0.5.10a1
    else:
        pre = (3, 0)
    post = int(match["post_n"] or 0) if match["post"] else -1
    dev = (0, int(match["dev_n"] or 0)) if match["dev"] else (1, 0)
    return release, pre, post, dev


@cache
def packaged_versions() -> tuple[str, ...]:
    """The SGLang versions whose flag lists are shipped, in version order (listed once per
    process: the package's data does not change under it, and every command's check asks)."""
    names = (
        entry.name.removeprefix("sglang-").removesuffix("-flags.json")
        for entry in resources.files(_data).iterdir()
        if entry.name.startswith("sglang-") and entry.name.endswith("-flags.json")
    )
    return tuple(sorted(names, key=version_key))


def _distance(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int]:
    """How far apart two release numbers are: the first component that differs (earlier is
    farther: another minor release is farther than any patch) and by how much."""
    width = max(len(a), len(b))
    pa, pb = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    for index, (x, y) in enumerate(zip(pa, pb, strict=True)):
        if x != y:
            return -index, abs(x - y)
    return -width, 0


def nearest_packaged(version: str, shipped: Sequence[str] | None = None) -> tuple[str, str | None]:
    """(the packaged version nearest to `version`, the other one when two are equally near).

    Only the two neighbours in version order compete (the newest list at or below `version`
    and the oldest at or above it); the nearer by release number wins, so a 0.5.10.post1 or a
    0.5.23rc1 gets its own release's list and 0.5.12 gets 0.5.10 rather than 0.5.23. On a tie
    the older wins: releases add flags more often than they drop them, so an older list errs
    by refusing a flag the host has (a message), where a newer one errs by accepting a flag
    the host lacks (a restart that dies in argparse).
    Raises ValueError when `version` is not a release number or nothing is packaged.
    """
    key = version_key(version)
    ordered = sorted(shipped if shipped is not None else packaged_versions(), key=version_key)
    if not ordered:
        raise ValueError("no flag list is packaged")
    below = [v for v in ordered if version_key(v) <= key]
    above = [v for v in ordered if version_key(v) >= key]
    if not below:
        return above[0], None
    if not above:
        return below[-1], None
    older, newer = below[-1], above[0]
    if older == newer:
        return older, None
    near_older = _distance(version_key(older)[0], key[0])
    near_newer = _distance(version_key(newer)[0], key[0])
    if near_newer < near_older:
        return newer, None
    return older, (newer if near_older == near_newer else None)


@cache
def _load_packaged(version: str) -> FlagCatalog:
    resource = resources.files(_data).joinpath(f"sglang-{version}-flags.json")
    if not resource.is_file():
        shipped = packaged_versions()
        raise LookupError(f"no flag catalog for SGLang {version}; shipped: {', '.join(shipped) or 'none'}")
    document = json.loads(resource.read_text(encoding="utf-8"))
    if document.get("sglang_version") != version:
        raise LookupError(f"{resource.name} describes SGLang {document.get('sglang_version')}, not {version}")
    return FlagCatalog.from_json(document)
