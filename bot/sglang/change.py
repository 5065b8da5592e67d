"""Changes to a launch line (add, set, remove a flag; set or unset an environment variable).

A change is data, so the same object is parsed from chat, stored with an experiment, applied to
the unit and shown in a diff. Applying is strict: a change that would do nothing, or that is
ambiguous about which occurrence it means, is refused, because each mistake costs the operator
a model reload that can take fifteen minutes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from bot.sglang.flagset import FlagItem, FlagSet, FlagValue

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

ChangeOp = Literal["add", "set", "remove", "env-set", "env-unset"]


class ChangeConflictError(ValueError):
    """The change does not fit the current launch line (adding a present flag, removing an absent one)."""


@dataclass(frozen=True)
class Change:
    """One edit. `flag` is canonical (`--tp-size`), `written` is how the user typed it (`--tp`)."""

    op: ChangeOp
    flag: str | None = None
    value: FlagValue = None
    env_name: str | None = None
    env_value: str | None = None
    written: str | None = None

    def describe(self) -> str:
        """How the change reads back to a human, in the grammar's own words."""
        if self.op == "env-set":
            return f"env set {self.env_name}={self.env_value}"
        if self.op == "env-unset":
            return f"env unset {self.env_name}"
        assert self.flag is not None
        if self.op == "remove":
            return f"remove {self.flag}"
        rendered = " ".join(FlagItem(self.flag, self.value).argv())
        return f"{self.op} {rendered}"

    def to_json(self) -> dict[str, Any]:
        value: Any = list(self.value) if isinstance(self.value, tuple) else self.value
        data: dict[str, Any] = {"op": self.op}
        if self.flag is not None:
            data |= {"flag": self.flag, "value": value}
        if self.env_name is not None:
            data |= {"name": self.env_name, "value": self.env_value}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change:
        """The change `to_json` stored (with an experiment's params): a list value is a multi-value flag."""
        op = data["op"]
        if op not in ("add", "set", "remove", "env-set", "env-unset"):
            raise ValueError(f"unknown change op {op!r}")
        if op in ("env-set", "env-unset"):
            env_value = data.get("value")
            return cls(
                op, env_name=str(data["name"]), env_value=None if env_value is None else str(env_value)
            )
        raw = data.get("value")
        value: FlagValue = tuple(str(v) for v in raw) if isinstance(raw, list | tuple) else raw
        return cls(op, str(data["flag"]), value)


Canonicalise = Callable[[str], str]


def _identity(name: str) -> str:
    return name


def apply_changes(
    flags: FlagSet,
    env: Mapping[str, str],
    changes: Iterable[Change],
    *,
    canonical: Canonicalise = _identity,
) -> tuple[FlagSet, dict[str, str]]:
    """Return the new flag set and environment; raise ChangeConflictError and change nothing on conflict.

    `canonical` maps any spelling the unit uses (`--tp`, `--tensor-parallel-size`) to the
    canonical name, so a change written one way finds a flag written another way.
    Rules (documented in docs/commands.md):
    - add: refused if the flag is already present (use set); appended at the end.
    - set: refused if absent (use add); replaces the first occurrence in place and drops
      repeats, since argparse lets the last one win and a set must leave no doubt.
    - remove: refused if absent; removes every occurrence.
    - env set overwrites or adds; env unset is refused if the variable is not set.
    """
    items = list(flags.items)
    new_env = dict(env)

    def positions(flag: str) -> list[int]:
        return [i for i, item in enumerate(items) if _safe(canonical, item.flag) == flag]

    for change in changes:
        if change.op == "env-set":
            assert change.env_name is not None
            assert change.env_value is not None
            new_env[change.env_name] = change.env_value
            continue
        if change.op == "env-unset":
            assert change.env_name is not None
            if change.env_name not in new_env:
                raise ChangeConflictError(
                    f"env unset {change.env_name}: the unit does not set {change.env_name}"
                )
            del new_env[change.env_name]
            continue
        assert change.flag is not None
        found = positions(change.flag)
        shown = change.written or change.flag
        if change.op == "add":
            if found:
                current = " ".join(items[found[-1]].argv())
                raise ChangeConflictError(
                    f"add {shown}: already present as `{current}`; use `set {change.flag}=VALUE` to change it"
                    if items[found[-1]].value is not None or change.value is not None
                    else f"add {shown}: already present as `{current}`; nothing would change"
                )
            items.append(FlagItem(change.flag, change.value))
        elif change.op == "set":
            if not found:
                raise ChangeConflictError(
                    f"set {shown}: not in the current flags; use `add {change.flag} VALUE`"
                )
            first = found[0]
            if items[first].value == change.value and len(found) == 1:
                raise ChangeConflictError(f"set {shown}: already `{' '.join(items[first].argv())}`")
            items[first] = FlagItem(change.flag, change.value)
            items = [item for i, item in enumerate(items) if i == first or i not in found]
        else:
            if not found:
                raise ChangeConflictError(f"remove {shown}: not in the current flags")
            items = [item for i, item in enumerate(items) if i not in found]
    return FlagSet(tuple(items)), new_env


def _safe(canonical: Canonicalise, name: str) -> str:
    """A unit may carry a flag this catalog does not know; compare it by its own spelling."""
    try:
        return canonical(name)
    except ValueError:
        return name


def diff_flagsets(before: FlagSet, after: FlagSet, *, canonical: Canonicalise = _identity) -> list[Change]:
    """The changes that turn `before` into `after`, by canonical name, in `after`'s order then removals.

    The last occurrence of a repeated flag is the one argparse uses, so that is what is compared.
    """

    def effective(flagset: FlagSet) -> dict[str, FlagValue]:
        result: dict[str, FlagValue] = {}
        for item in flagset.items:
            result[_safe(canonical, item.flag)] = item.value
        return result

    old, new = effective(before), effective(after)
    changes = [
        Change("add", flag, value) if flag not in old else Change("set", flag, value)
        for flag, value in new.items()
        if flag not in old or old[flag] != value
    ]
    changes += [Change("remove", flag) for flag in old if flag not in new]
    return changes
