"""Where a command's answer goes in Slack, and the status card that opens an investigation thread.

A thread flagbot opens is recorded with its target (`bot.digest.threads.record_thread`), so an
`@flagbot ...` in it acts on that target, never on the default one (`thread_target`).
"""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk.web.async_client import AsyncWebClient

from bot.commands import CommandError
from bot.digest.threads import THREAD_ACTION, record_thread
from bot.slack.render import CardState, status_card
from bot.slack.reporter import SlackThreadReporter, metadata
from bot.store import AsyncStore
from bot.store.records import thread_targets


@dataclass(frozen=True)
class Where:
    """Where an answer goes: the channel, and the thread when the command came from one."""

    channel: str
    thread_ts: str | None = None


async def open_thread(
    client: AsyncWebClient,
    where: Where,
    card: CardState,
    *,
    hypothesis_id: int | None = None,
    store: AsyncStore | None = None,
) -> SlackThreadReporter:
    """Post the status card (a new thread, or a reply in the given one); its reporter. With
    `store`, the thread is recorded with the card's target at once (before the run starts)."""
    blocks, fallback = status_card(card)
    root = await client.chat_postMessage(
        channel=where.channel,
        thread_ts=where.thread_ts,
        blocks=blocks,
        text=fallback,
        metadata=metadata(None, hypothesis_id),
    )
    thread_ts = where.thread_ts or str(root["ts"])
    if store is not None:
        await store.run(
            record_thread,
            store.store,
            experiment_id=None,
            target=card.target,
            channel=where.channel,
            thread_ts=thread_ts,
        )
    return SlackThreadReporter(
        client,
        where.channel,
        str(root["ts"]),
        card,
        thread_ts=thread_ts,
        hypothesis_id=hypothesis_id,
        store=store,  # the finished card's buttons are chosen from the stored experiment
    )


async def thread_target(store: AsyncStore, channel: str, thread_ts: str) -> str | None:
    """The one target the thread is about; None for a thread flagbot did not open. CommandError
    when its runs are about several targets (the command must name one with `target=`)."""
    found = await store.run(thread_targets, store.store, channel, thread_ts, action=THREAD_ACTION)
    if len(found) > 1:
        raise CommandError(
            f"this thread has runs on several targets ({', '.join(sorted(found))}): name the one you "
            "mean with target=NAME"
        )
    return next(iter(found), None)
