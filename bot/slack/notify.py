"""Checks, drift and the weekly digest told in Slack: the implementations of `bot.app.notify`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from slack_sdk.web.async_client import AsyncWebClient

from bot.app.notify import Notice
from bot.slack.digest import post_weekly_digest
from bot.slack.render import messages, render_block
from bot.slack.services import SlackServices


@dataclass
class SlackNotifier:
    """Posts into the notice's thread, or `default_channel` when the notice names none.

    A notice with neither a channel nor a default goes nowhere (returns None): a check of an
    experiment run from the CLI, with no investigation channel configured, is still recorded.
    """

    client: AsyncWebClient
    default_channel: str | None = None

    async def notify(self, notice: Notice) -> str | None:
        channel = notice.channel or self.default_channel
        if channel is None:
            return None
        thread = notice.thread_ts if notice.channel else None
        head = await self.client.chat_postMessage(channel=channel, thread_ts=thread, text=notice.text)
        first = str(head["ts"])
        for block in notice.blocks:
            rendered = render_block(block)
            for part, text in messages(rendered.blocks, rendered.text):
                await self.client.chat_postMessage(
                    channel=channel, thread_ts=thread or first, blocks=part, text=text
                )
        return first


@dataclass
class SlackDigestPublisher:
    """The Monday digest, posted to `schedules.digest_channel` (a `bot.app.notify.DigestPublisher`)."""

    services: SlackServices
    client: AsyncWebClient

    async def publish_weekly(self, now: datetime) -> None:
        await post_weekly_digest(self.services, self.client, now)
