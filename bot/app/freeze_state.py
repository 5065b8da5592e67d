"""What freeze holds on a target now: a `freeze` command's (its newest freeze/unfreeze audit
event) or a window of `[targets.NAME] freeze` in flagbot.toml, and the refusal it makes.

Why apart from `bot.app.freeze`: `status` shows the freeze, and every change asks for it, but only
deciding *which* commands change a target needs the playbooks (their steps' effects); `status`
imports this module and not the playbook loader, which keeps `flagbot status` quick (issue 22).
The rules themselves are said in `bot.app.freeze`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from bot.app.context import AppContext
from bot.app.errors import AppError
from bot.config import Settings
from bot.store.loop_models import AuditEvent
from bot.store.models import utcnow
from bot.store.records import FREEZE_ACTION, latest_freeze_event

CONFIG_SOURCE = "flagbot.toml"


class FrozenError(AppError):
    """A command that would change a frozen target; nothing ran (the message names the freeze)."""


@dataclass(frozen=True)
class Freeze:
    """One freeze in effect: why, who set it (a user, or the config), since and until when."""

    target: str
    reason: str
    by: str
    source: Literal["command", "config"]
    since: datetime | None = None
    until: datetime | None = None
    """None: until someone runs `unfreeze`."""

    def describe(self) -> str:
        who = (
            f"a window in {CONFIG_SOURCE} ([targets.{self.target}] freeze)"
            if self.source == "config"
            else self.by
        )
        until = (
            f"until {self.until.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
            if self.until is not None
            else "until someone runs `unfreeze`"
        )
        return f"{self.target} is frozen: {self.reason!r} (set by {who}, {until})"

    def to_json(self) -> dict[str, object]:
        return {
            "target": self.target,
            "reason": self.reason,
            "by": self.by,
            "source": self.source,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "text": self.describe(),
        }


def aware_utc(value: datetime) -> datetime:
    """`value` as UTC when it carries no offset (SQLite gives stored times back naive)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def command_freeze(event: AuditEvent | None, now: datetime) -> Freeze | None:
    """The freeze a target's newest freeze/unfreeze event leaves in effect at `now`."""
    if event is None or event.action != FREEZE_ACTION:
        return None
    until_text = event.detail.get("until")
    until = datetime.fromisoformat(str(until_text)) if until_text else None
    if until is not None and aware_utc(until) <= now:
        return None
    return Freeze(
        event.target,
        str(event.detail.get("reason", "")),
        event.actor,
        "command",
        aware_utc(event.at),
        None if until is None else aware_utc(until),
    )


def config_freeze(settings: Settings, target: str, now: datetime) -> Freeze | None:
    """The config window covering `now` (start inclusive, end exclusive); the one ending last."""
    config = settings.targets.get(target)
    windows = [window for window in (config.freeze if config else []) if window.covers(now)]
    if not windows:
        return None
    window = max(windows, key=lambda item: item.end)
    return Freeze(target, window.reason, CONFIG_SOURCE, "config", window.start, window.end)


async def active_freeze(ctx: AppContext, target: str, *, now: datetime | None = None) -> Freeze | None:
    """The freeze in effect on `target` (a command's first, else a config window), or None."""
    at = now or utcnow()
    event = await ctx.store.run(latest_freeze_event, ctx.store.store, target)
    return command_freeze(event, at) or config_freeze(ctx.settings, target, at)


async def check_not_frozen(ctx: AppContext, target: str, what: str, *, now: datetime | None = None) -> None:
    """FrozenError when `target` is frozen: `what` (a command, in words) would change it."""
    found = await active_freeze(ctx, target, now=now)
    if found is not None:
        raise frozen_error(found, what)


def frozen_error(found: Freeze, what: str) -> FrozenError:
    """The refusal of `what` (a command, in words) by the freeze `found`."""
    return FrozenError(
        f"{what} refused: {found.describe()}. Reads (status, log, logs, observe, grep, explain, predict) go on"
        + ("; `unfreeze` lifts it" if found.source == "command" else "; edit the config to end it early")
    )
