"""The digest in Slack: the weekly post (called by the scheduler) and `/flagbot digest`.

Both build the digest on the store's worker thread, draw the chart on another thread (the
event loop keeps serving Slack meanwhile), post the Block Kit (split at 50 blocks per
message) and upload the chart with files_upload_v2 next to it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.app import digest as digests
from bot.app.digest import week_ended_before
from bot.commands import Invocation
from bot.digest.week import IsoWeek
from bot.slack.digest_blocks import render_blocks
from bot.slack.render import messages
from bot.slack.services import SlackServices
from bot.target.evidence import Evidence

__all__ = ["Posted", "digest_answer", "post_built", "post_digest", "post_weekly_digest", "week_ended_before"]

log = logging.getLogger(__name__)


@dataclass
class Posted:
    """What a digest post left in Slack (tests and the scheduler's log read it)."""

    week: IsoWeek
    channel: str
    messages: list[str] = field(default_factory=list)
    chart_file: str | None = None


async def post_digest(
    services: SlackServices,
    client: AsyncWebClient,
    week: IsoWeek,
    *,
    channel: str,
    thread_ts: str | None = None,
    target: str | None = None,
    now: datetime | None = None,
) -> Posted:
    """Build, render and post the digest of `week` to `channel` (in `thread_ts` when given)."""
    built = await digests.build(services.context, week, target, now=now)
    return await post_built(client, built, channel=channel, thread_ts=thread_ts)


async def post_built(
    client: AsyncWebClient, built: digests.BuiltDigest, *, channel: str, thread_ts: str | None = None
) -> Posted:
    """Post a digest already built (its blocks, then its chart) to `channel`."""
    week, digest, png = built.week, built.digest, built.chart_png
    rendered = render_blocks(digest)
    posted = Posted(week, channel)
    for part, text in messages(rendered.blocks, rendered.text):
        answer = await client.chat_postMessage(
            channel=channel, thread_ts=thread_ts, blocks=part, text=text, unfurl_links=False
        )
        posted.channel = str(answer.get("channel") or channel)
        posted.messages.append(str(answer["ts"]))
    if png is not None:
        uploaded = await client.files_upload_v2(
            channel=posted.channel,  # the id chat.postMessage answered with: uploads want an id, not #name
            thread_ts=thread_ts,
            file=png,
            filename=f"flagbot-digest-{week}.png",
            title=f"{digest.title()}: capacity and throughput",
            initial_comment=f"Effective capacity and output throughput, {week} ({digest.timezone})",
        )
        posted.chart_file = str((uploaded.get("file") or {}).get("id") or "") or None
    return posted


async def post_weekly_digest(services: SlackServices, client: AsyncWebClient, now: datetime) -> None:
    """The scheduler's job (`schedules.digest_cron`): last week's digest, one part per channel
    (`bot.app.digest.weekly_sections`: each target's own `channel`, the rest to
    `schedules.digest_channel`), built once. A channel whose post fails is logged; the others
    are still posted."""
    schedules = services.settings.schedules
    week = week_ended_before(now, schedules.timezone)
    sections = await digests.weekly_sections(services.context, week, now=now)
    if not sections:
        log.warning(
            "weekly digest not posted: set schedules.digest_channel (or a target's channel) in flagbot.toml"
        )
        return
    for section in sections:
        try:
            posted = await post_built(client, section.built, channel=section.channel)
        except (SlackClientError, OSError, TimeoutError):  # one channel must not cost the others their digest
            log.exception("weekly digest %s not posted to %s", week, section.channel)
            continue
        log.info(
            "weekly digest %s posted to %s (%d message(s), chart %s)",
            week,
            posted.channel,
            len(posted.messages),
            posted.chart_file or "none",
        )


async def digest_answer(
    services: SlackServices,
    client: AsyncWebClient,
    invocation: Invocation,
    *,
    user: str,
    channel: str,
    thread_ts: str | None,
) -> list[Evidence] | None:
    """`/flagbot digest [week=2026-W48] [target=T]`: posts the digest where it was asked for.

    Returns None: the digest (blocks and chart) is posted here, not as evidence blocks. A
    malformed week or an unknown target raises ValueError with the expected form, which the
    Slack error handler shows the user; nothing is posted then.
    """
    ctx = services.context
    week = digests.week_of(ctx.settings, invocation.options.get("week"))
    target = await digests.digest_target(ctx, invocation.options.get("target"))
    posted = await post_digest(services, client, week, channel=channel, thread_ts=thread_ts, target=target)
    log.info("digest %s posted for %s in %s", week, user, posted.channel)
    return None
