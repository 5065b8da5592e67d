"""Where a check's or the drift watch's change of state is told: a Slack thread, or the console.

Why an interface: the scheduler runs in the bot (posts with chat.postMessage into the
experiment's thread, or the investigation channel for drift) and from the CLI (`flagbot checks
run`, which prints); the check logic does not care which.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.target.evidence import Evidence

__all__ = ["ConsoleNotifier", "MemoryNotifier", "Notice", "Notifier", "SlackNotifier"]


@dataclass(frozen=True)
class Notice:
    """One message: where (channel and thread, when known), a one-line text, and the evidence."""

    text: str
    blocks: tuple[Evidence, ...] = ()
    channel: str | None = None
    thread_ts: str | None = None


class Notifier(Protocol):
    async def notify(self, notice: Notice) -> str | None:
        """Tell it; the posted message's id (Slack ts) or None when it went nowhere to keep."""


@dataclass
class MemoryNotifier:
    """Keeps every notice (tests)."""

    notices: list[Notice] = field(default_factory=list)

    async def notify(self, notice: Notice) -> str | None:
        self.notices.append(notice)
        return f"memory-{len(self.notices)}"


@dataclass
class ConsoleNotifier:
    """Prints the notice and its evidence (the CLI)."""

    stream: Any = None

    async def notify(self, notice: Notice) -> str | None:
        from rich.console import Console

        from bot.loop.console import render_evidence

        console = Console(file=self.stream or sys.stdout, highlight=False)
        console.print(notice.text, markup=False, soft_wrap=True)
        render_evidence(console, notice.blocks)
        return None


@dataclass
class SlackNotifier:
    """Posts into the notice's thread, or `default_channel` when the notice names none.

    A notice with neither a channel nor a default goes nowhere (returns None): a check of an
    experiment run from the CLI, with no investigation channel configured, is still recorded.
    """

    client: Any
    """An `AsyncWebClient` (or anything with its `chat_postMessage` coroutine)."""
    default_channel: str | None = None

    async def notify(self, notice: Notice) -> str | None:
        from bot.slack.render import messages, render_block

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
