"""Where a command's answer goes in Slack, and the status card that opens an investigation thread."""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.render import CardState, status_card
from bot.slack.reporter import SlackThreadReporter, metadata


@dataclass(frozen=True)
class Where:
    """Where an answer goes: the channel, and the thread when the command came from one."""

    channel: str
    thread_ts: str | None = None


async def open_thread(
    client: AsyncWebClient, where: Where, card: CardState, *, hypothesis_id: int | None = None
) -> SlackThreadReporter:
    """Post the status card (a new thread, or a reply in the given one); its reporter."""
    blocks, fallback = status_card(card)
    root = await client.chat_postMessage(
        channel=where.channel,
        thread_ts=where.thread_ts,
        blocks=blocks,
        text=fallback,
        metadata=metadata(None, hypothesis_id),
    )
    thread_ts = where.thread_ts or str(root["ts"])
    return SlackThreadReporter(
        client, where.channel, str(root["ts"]), card, thread_ts=thread_ts, hypothesis_id=hypothesis_id
    )
