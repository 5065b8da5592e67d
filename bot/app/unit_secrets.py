"""`config check --units`: warn about a secret written literally into a target's unit.

A literal `--api-key VALUE` (or any secret flag's value, or an `Environment=` secret) in the
unit reaches flagbot whenever it reads the unit: flagbot masks it in everything it shows and
stores (`bot.redaction`), but must keep it in the drop-in it writes and in its backup of
that drop-in. A `${VAR}` reference to a variable of an `EnvironmentFile=` keeps the value on the
node only; the warning says how.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bot.config import Settings
from bot.redaction import REFERENCE, redactor
from bot.target.session import TargetSession
from bot.target.unit import UnitView, read_unit


@dataclass(frozen=True)
class UnitFinding:
    """One line of `config check --units`: a warning, or why a unit could not be read."""

    target: str
    node: str
    kind: str  # "warning" | "note"
    text: str

    def render(self) -> str:
        return f"{self.kind}: {self.target} ({self.node}): {self.text}"


def literal_secrets(view: UnitView) -> list[str]:
    """What is written literally that should be a reference: secret flags with a literal value
    and secret `Environment=` names, each with the advice (never the value)."""
    found: list[str] = []
    names = redactor()
    for item in view.flags.items:
        if not names.is_secret_flag(item.flag) or item.value is None:
            continue
        values = item.value if isinstance(item.value, tuple) else (item.value,)
        if not all(REFERENCE.fullmatch(value) for value in values):
            variable = item.flag.lstrip("-").replace("-", "_").upper()
            found.append(
                f"`{item.flag}` has a literal value in {view.unit}'s ExecStart=: it is copied into "
                f"flagbot's drop-in and its backups. Keep it on the node: put the value in a root-only file "
                f"named by EnvironmentFile= as the variable {variable}, and write `{item.flag} ${{{variable}}}`"
            )
    for name in view.environment:
        if names.is_secret_name(name):
            found.append(
                f"the environment variable {name} is a secret written into {view.unit} (Environment=): move "
                "it to a root-only file named by EnvironmentFile= (flagbot's login cannot read that file)"
            )
    return found


async def unit_findings(settings: Settings, *, timeout_s: float = 15.0) -> list[UnitFinding]:
    """Read node 0's unit of every target (no store, nothing written) and list the findings."""

    async def one(name: str) -> list[UnitFinding]:
        target = settings.targets[name]
        node = target.nodes[0].host
        try:
            async with TargetSession.open(name, target) as ts:
                view = await asyncio.wait_for(read_unit(ts.node0), timeout_s)
        except Exception as exc:  # unreachable, refused, no launch line: said, not fatal
            return [
                UnitFinding(
                    name,
                    node,
                    "note",
                    f"unit not read: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                )
            ]
        return [UnitFinding(name, view.node, "warning", text) for text in literal_secrets(view)]

    results = await asyncio.gather(*(one(name) for name in settings.targets))
    return [finding for found in results for finding in found]
