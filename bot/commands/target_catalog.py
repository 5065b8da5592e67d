"""Which flag list judges a command's flags: the one of the SGLang version its target runs.

One rule for the CLI and Slack: `target=` in the words, else `default_target`; a configured
`sglang_version` picks the packaged list of that version, else the nearest packaged list
(`FlagCatalog.nearest`), named in the note; without a configured version the packaged 0.5.10
list is used. A `target=` naming no configured target is refused before any flag is judged
against the wrong list; `target=all` passes here (a command that cannot take every target
refuses it as an unknown target when it resolves its target).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.config import Settings
from bot.config.schema import ALL_TARGETS
from bot.sglang.catalog import FlagCatalog


class UnknownTargetError(LookupError):
    """`target=` names a target flagbot.toml does not define."""


@dataclass(frozen=True)
class TargetCatalog:
    catalog: FlagCatalog
    note: str | None = None
    """Set when the target's own version has no packaged list and the nearest one stands in."""


def catalog_for(settings: Settings, words: Sequence[str]) -> TargetCatalog:
    named = next((word.split("=", 1)[1] for word in words if word.startswith("target=")), None)
    if named is not None and settings.targets and named not in (*settings.targets, ALL_TARGETS):
        raise UnknownTargetError(f"unknown target {named!r}; targets: {', '.join(sorted(settings.targets))}")
    name = named or settings.default_target  # `target=all` (the fleet's `status`) judges no flag
    version = settings.targets[name].sglang_version if name in settings.targets else None
    catalog, note = FlagCatalog.nearest(version)
    return TargetCatalog(catalog, note)
