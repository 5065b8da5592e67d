"""`digest [week=YYYY-Www] [target=T]`: the weekly post-mortem digest, for any front end and the
Monday job. Building it reads the store (on its worker thread) and drawing the chart runs on
another thread, so a bot's event loop keeps serving Slack meanwhile.

The Monday job posts one digest per channel (`weekly_sections`): a target with its own
`channel` gets its part there, every other target's goes to `schedules.digest_channel`; the
week is built once and cut (`bot.digest.sections`), never read again per channel.
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
from bot.digest.sections import TargetFilter, digest_section
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


@dataclass(frozen=True)
class ChannelDigest:
    """One channel's part of the weekly digest, with its own chart."""

    channel: str
    built: BuiltDigest


def digest_channel_of(settings: Settings, target: str) -> str | None:
    """Where `target`'s weekly digest goes: its own `channel`, else `schedules.digest_channel`
    (also for a target removed from flagbot.toml that still has a history); None: nowhere."""
    found = settings.targets.get(target)
    own = found.channel if found is not None else None
    return own or settings.schedules.digest_channel


def _posted_in(settings: Settings, channel: str) -> TargetFilter:
    """Whether a target's lines belong in `channel`'s part (`digest_channel_of`)."""

    def keep(target: str) -> bool:
        return digest_channel_of(settings, target) == channel

    return keep


def weekly_channels(settings: Settings) -> list[str]:
    """The channels the weekly digest is posted to: `schedules.digest_channel` first, then each
    target's own `channel`, once each; empty when none is set (the job is not scheduled)."""
    found = [settings.schedules.digest_channel, *(t.channel for t in settings.targets.values())]
    return list(dict.fromkeys(channel for channel in found if channel))


async def weekly_sections(
    ctx: AppContext, week: IsoWeek, *, now: datetime | None = None
) -> list[ChannelDigest]:
    """The week's digest of every target, built once, cut into one part per channel of
    `weekly_channels`: a target's own channel's part names its targets in the title; the part
    for `schedules.digest_channel` holds every target without a channel of its own."""
    settings = ctx.settings
    channels = weekly_channels(settings)
    if not channels:
        return []
    whole = await ctx.store.run(build_digest, ctx.store.store, settings, week, None)
    sections: list[ChannelDigest] = []
    for channel in channels:
        names = [name for name, t in settings.targets.items() if t.channel == channel]
        general = channel == settings.schedules.digest_channel
        part = digest_section(
            whole, _posted_in(settings, channel), scope=None if general else ", ".join(names)
        )
        png = await asyncio.to_thread(render_chart_png, part, now=now)
        sections.append(ChannelDigest(channel, BuiltDigest(week, part, png)))
    return sections
