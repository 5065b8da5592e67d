"""`digest [week=YYYY-Www] [target=T]`: the weekly post-mortem digest, for any front end and the
Monday job. Building it reads the store (on its worker thread) and drawing the chart runs on
another thread, so a bot's event loop keeps serving Slack meanwhile.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.app.context import AppContext
from bot.commands import CommandError
from bot.config import Settings
from bot.digest.build import build_digest
from bot.digest.chart import render_chart_png
from bot.digest.model import Digest
from bot.digest.week import IsoWeek, parse_week, zone
from bot.store.digest_reads import stored_targets


@dataclass(frozen=True)
class BuiltDigest:
    """A digest and its chart (PNG bytes; None when nothing was recorded that week)."""

    week: IsoWeek
    digest: Digest
    chart_png: bytes | None


def week_of(settings: Settings, text: str | None, *, now: datetime | None = None) -> IsoWeek:
    """`YYYY-Www`, else the week containing now on the team's clock; WeekFormatError (a
    ValueError naming the expected form) when malformed."""
    if text:
        return parse_week(text)
    return IsoWeek.containing(now or datetime.now(UTC), zone(settings.schedules.timezone))


def week_ended_before(now: datetime, timezone: str) -> IsoWeek:
    """The last week that has completely ended at `now` on the team's clock: the one before now's."""
    return IsoWeek.containing(now, zone(timezone)).previous()


async def digest_target(ctx: AppContext, target: str | None) -> str | None:
    """The one target to digest (None: all); a target removed from flagbot.toml still has a
    history, so a stored one is accepted too. CommandError naming the configured ones."""
    if target is None or target in ctx.settings.targets:
        return target
    if target in await ctx.store.run(stored_targets, ctx.store.store):
        return target
    known = ", ".join(sorted(ctx.settings.targets)) or "none configured"
    raise CommandError(f"unknown target {target!r}; targets: {known}")


async def build(
    ctx: AppContext, week: IsoWeek, target: str | None, *, chart: bool = True, now: datetime | None = None
) -> BuiltDigest:
    """The digest of `week` (of one target, or all), with its chart when `chart`."""
    digest = await ctx.store.run(build_digest, ctx.store.store, ctx.settings, week, target)
    png = await asyncio.to_thread(render_chart_png, digest, now=now) if chart else None
    return BuiltDigest(week, digest, png)
