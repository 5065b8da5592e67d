"""The shape of one entry of the node command table (`bot.target.privileged.COMMANDS`).

Kept apart from the table itself so the table module holds only the commands, the check that
keeps them safe, and their rendering: a literal word (with `{param}` fields), an optional
`flag value` pair, or a list parameter spread as the last words.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Formatter

from bot.target.params import DERIVED


@dataclass(frozen=True)
class Opt:
    """An optional argument: `flag value` when the parameter is given (`flag` alone for a switch)."""

    flag: str
    param: str


@dataclass(frozen=True)
class Rest:
    """The command's last words: each element of a list parameter (`LIST_PARAMS`) as one argv word.

    For an argv handed to a program whole (SGLang's own argument parser); never in a privileged
    command, whose sudoers line must spell out every word.
    """

    param: str


Token = str | Opt | Rest
"""A literal (which may hold `{param}` fields, filled with validated values), an `Opt` or a `Rest`."""


@dataclass(frozen=True)
class NodeCommand:
    name: str
    program: str
    args: tuple[Token, ...]
    privileged: bool
    doc: str
    stdin: bool = False
    """The command reads its payload on stdin (`tee` writing a file)."""

    @property
    def required(self) -> frozenset[str]:
        """Parameters a caller must give (derived ones excluded)."""
        names = {
            field
            for token in self.args
            if isinstance(token, str)
            for _, field, _, _ in Formatter().parse(token)
            if field
        }
        if names & DERIVED.keys():
            names = (names - DERIVED.keys()) | {"unit"}
        return frozenset(names | {token.param for token in self.args if isinstance(token, Rest)})

    @property
    def optional(self) -> frozenset[str]:
        return frozenset(token.param for token in self.args if isinstance(token, Opt))


def entry(
    name: str, program: str, *args: Token, privileged: bool = False, stdin: bool = False, doc: str
) -> tuple[str, NodeCommand]:
    """One `name: NodeCommand` pair of the table (the table is `dict([entry(...), ...])`)."""
    return name, NodeCommand(name, program, tuple(args), privileged, doc, stdin)
