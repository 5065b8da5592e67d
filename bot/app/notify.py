"""Where a check's or the drift watch's change of state is told, and where the weekly digest
goes: interfaces the application layer defines and the front ends implement.

Why interfaces: checks and the drift watch run in the bot (which posts into the experiment's
thread, or the investigation channel for drift) and from the CLI (`flagbot checks run`, which
prints); the check logic does not care which. The scheduler runs the jobs but posts nothing
itself: it is handed a `Notifier` and a `DigestPublisher` by `flagbot serve`
(`bot.slack.notify` has the Slack ones, `bot.cli.notify` the console one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from bot.target.evidence import Evidence

__all__ = ["DigestPublisher", "MemoryNotifier", "Notice", "Notifier"]


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
    """Keeps every notice (a process that tells nobody, and tests)."""

    notices: list[Notice] = field(default_factory=list)

    async def notify(self, notice: Notice) -> str | None:
        self.notices.append(notice)
        return f"memory-{len(self.notices)}"


class DigestPublisher(Protocol):
    async def publish_weekly(self, now: datetime) -> None:
        """Post the digest of the week that ended before `now` where the team reads it."""
