"""The flag set: an SGLang argv as an ordered value that can be parsed, edited and diffed.

Order and repetition are kept exactly as written, because argparse gives the last occurrence
of a repeated flag the win and a human reading a diff expects their own order back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FlagValue = str | tuple[str, ...] | None
"""None for a boolean flag, a string for one value, a tuple for a flag given several values."""


@dataclass(frozen=True)
class FlagItem:
    """One flag as written on a launch line: `--x` (boolean), `--y v`, or `--z a b c`."""

    flag: str
    value: FlagValue = None

    def argv(self) -> list[str]:
        """The tokens this item contributes to an argv, in order."""
        if self.value is None:
            return [self.flag]
        if isinstance(self.value, tuple):
            return [self.flag, *self.value]
        return [self.flag, self.value]

    def to_json(self) -> dict[str, Any]:
        value: Any = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"flag": self.flag, "value": value}


@dataclass(frozen=True)
class FlagSet:
    """An ordered list of flags; operations return new sets and never mutate."""

    items: tuple[FlagItem, ...] = field(default_factory=tuple)

    def argv(self) -> list[str]:
        return [token for item in self.items for token in item.argv()]

    def to_json(self) -> list[dict[str, Any]]:
        return [item.to_json() for item in self.items]
