"""One start's journal on one node: the lines of a single systemd invocation, as observe reads them.

Read by `_SYSTEMD_INVOCATION_ID=` as JSON with `--all` (a 14 KB `server_args=` line and tqdm's
`\\r` lines survive), from the start's first line to a little after its ready line: startup is
what a snapshot is about. Apart from observe because it is the one remote stream observe reads,
with its own bounds and its own wait for journald to catch up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bot.sglang import log_events as ev
from bot.sglang.log import LogReport, parse_log_lines
from bot.target.journal_read import JournalEntry, iter_entries
from bot.target.nodestate import Backoff, NodeLike
from bot.target.privileged import render_params
from bot.target.readiness_result import Readiness

__all__ = [
    "AFTER_READY_LINES",
    "MAX_JOURNAL_BYTES",
    "InvocationJournal",
    "journal_with_ready",
    "read_invocation",
    "ready_line_into",
]

MAX_JOURNAL_BYTES = 64 << 20
"""A long-running server's invocation journal is mostly access and batch lines; startup is at its head."""
AFTER_READY_LINES = 20


@dataclass
class InvocationJournal:
    """The lines of one invocation as read, with the exact command and the cursor range."""

    node: str
    invocation: str
    command: str
    entries: list[JournalEntry] = field(default_factory=list)
    truncated: bool = False

    @property
    def report(self) -> LogReport:
        return parse_log_lines(entry.message for entry in self.entries)

    def range(self) -> dict[str, Any]:
        first, last = (self.entries[0], self.entries[-1]) if self.entries else (None, None)
        return {
            "node": self.node,
            "invocation": self.invocation,
            "command": self.command,
            "lines": len(self.entries),
            "first_cursor": first.cursor if first else None,
            "last_cursor": last.cursor if last else None,
            "truncated": self.truncated,
        }


async def read_invocation(
    node: NodeLike, invocation: str, *, stop_after_ready: bool = True
) -> InvocationJournal:
    """The service's own lines of one invocation, from its first line; stops a little after the
    ready line (startup is what a snapshot is about) or at `MAX_JOURNAL_BYTES`."""
    params: dict[str, object] = {"invocation": invocation, "output": "json", "all": True}
    command = render_params("journal-invocation", params, sudo=False).shell
    journal = InvocationJournal(node.name, invocation, command)
    size, after_ready = 0, -1
    stream = node.stream("journal-invocation", **params)
    try:
        async for entry in iter_entries(stream):
            journal.entries.append(entry)
            size += len(entry.message) + 200
            if after_ready < 0 and ev.READY_TEXT in entry.message:
                after_ready = 0
            elif after_ready >= 0:
                after_ready += 1
            if (stop_after_ready and after_ready >= AFTER_READY_LINES) or size > MAX_JOURNAL_BYTES:
                journal.truncated = True
                break
    finally:
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            await closer()  # ends the remote journalctl at once
    return journal


async def journal_with_ready(
    node: NodeLike, invocation: str, *, healthy: bool, wait_s: float
) -> InvocationJournal:
    """Re-read while the server is healthy but its ready line has not reached the journal yet
    (journald lags the process by ~0.3 s)."""
    deadline = time.monotonic() + wait_s
    backoff = Backoff(0.1, 1.5, 0.5)
    while True:
        journal = await read_invocation(node, invocation)
        ready = any(ev.READY_TEXT in entry.message for entry in journal.entries)
        if ready or not healthy or time.monotonic() > deadline:
            return journal
        await backoff.sleep()


def ready_line_into(readiness: Readiness, journal: InvocationJournal) -> None:
    """Record the ready line's moments from this read when the wait did not stay for them."""
    if readiness.ready_line_at is not None or journal.invocation != readiness.invocation:
        return  # recorded already, or another start's journal (an automatic restart since)
    line = next((entry for entry in journal.entries if ev.READY_TEXT in entry.message), None)
    if line is not None:
        readiness.ready_line_at = line.realtime
        readiness.ready_line_seen_at = time.time()
